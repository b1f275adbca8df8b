"""vLLM: ``vllm serve MODEL ...`` and the same settings as a ``vllm serve --config`` YAML.

Verified against (flag names, accepted values, behaviour quoted in the notes):

- vllm/engine/arg_utils.py @ 99d7eb5 — ``--quantization/-q``, ``--dtype``, ``--kv-cache-dtype``,
  ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--tensor-parallel-size/-tp``,
  ``--gpu-memory-utilization``, ``--max-model-len``; ``--quantization bitsandbytes`` also sets
  the bitsandbytes load format by itself (``create_load_config``).
- vllm/config/cache.py @ c1d8642 — ``CacheDType`` accepts ``fp8`` (= ``fp8_e4m3``); KV scales
  default to 1.0 unless the checkpoint has them or ``--calculate-kv-scales`` is set.
- vllm/model_executor/layers/quantization/__init__.py @ 05d9095 — ``QuantizationMethods``.
- vllm/model_executor/model_loader/bitsandbytes_loader.py @ c9e9c48 — in-flight quantization
  calls ``quantize_4bit(compress_statistics=True, quant_type="nf4")``; LLM.int8 (``load_in_8bit``)
  is read only from pre-quantized checkpoints, which refuse tensor parallelism.
- docs/features/quantization/fp8.md @ 405f4e1 — online ``fp8``: E4M3 weights with a per-tensor
  scale, dynamic per-tensor activation scale; W8A8 needs compute capability >= 8.9, Ampere
  runs weight-only W8A16 through FP8 Marlin; the model is loaded at full precision first.
- vllm/model_executor/layers/quantization/fp8.py @ 1436674 — ``Fp8LinearMethod`` quantizes dynamic
  activations per token where CUTLASS FP8 is supported, per tensor otherwise (ROCm).
- docs/features/quantization/llm_compressor/int8_w8a8.md @ 4ad1404 — an llm-compressor checkpoint
  is served as ``LLM("./CHECKPOINT")``: the scheme comes from its config.json, no flag.
- https://docs.vllm.ai/en/latest/configuration/serve_args/ — ``--config`` YAML takes the long
  option names; command-line values override the file.
- docs/features/spec_decode/n_gram.md and vllm/config/speculative.py — ``--speculative-config`` JSON with
  ``method: ngram``, ``num_speculative_tokens`` (no default), ``prompt_lookup_min``/``prompt_lookup_max`` (both 5
  when neither is set); vllm/v1/spec_decode/ngram_proposer.py — the proposer ``recommender/speculation/ngram.py``
  replays. Prefix caching is on by default in the V1 engine (``--no-enable-prefix-caching`` turns it off), so
  nothing is emitted for it.
- vllm-project/vllm PR #23014 and issue #31668 — torchao in vLLM needs a serialized torchao
  config (``--hf-overrides quantization_config_dict_json``) or a torchao checkpoint.

Parallelism (tensor, or an expert-parallel replica with data-parallel attention): ``vllm_parallel.py``, its flags
cited there.

Where it runs each scheme family (``KERNELS``), verified against vllm-project/vllm:
- vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py @ be69645 —
  ``_get_scheme_from_parts``: FP8 W8A8 below the scheme's minimum becomes CompressedTensorsW8A16Fp8;
  WNA16 takes symmetric and asymmetric (zero-point) weights; ``get_scheme`` raises below a scheme's
  ``get_min_capability()``.
- .../compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py @ de4766a — min 89; e4m3fnuz on ROCm.
- .../compressed_tensors/schemes/compressed_tensors_w8a16_fp8.py @ aa63715 — FP8 Marlin, min 80.
- .../compressed_tensors/schemes/compressed_tensors_w8a8_int8.py @ c45614b — min 75.
- docs/features/quantization/llm_compressor/int8_w8a8.md @ 4ad1404 — INT8 on capability 7.5 up to,
  not including, 10.0 (Blackwell); the checkpoint is served without a quantization flag.
- vllm/model_executor/kernels/linear/__init__.py @ db0b826 — kernel registries: WNA16 on CUDA
  Machete, AllSpark, Marlin, Conch, Exllama; on ROCm Conch, Exllama; INT8 W8A8 on ROCm Aiter,
  Triton; on the CPU CPUInt8ScaledMM.
- vllm/model_executor/kernels/linear/mixed_precision/marlin.py @ a2f9569 — Marlin min 75, CUDA
  only, zero points (uint4) supported; PR #29901 (Marlin on Turing), PR #14211 (compressed-tensors
  WNA16 zero points).
- .../mixed_precision/conch.py @ bc79aa1 (needs the optional conch-triton-kernels package) and
  exllama.py @ 220c38a (float16 activations, symmetric types only): ROCm has no default bf16 W4A16.
- .../scaled_mm/triton.py @ e2054e1 — TritonInt8ScaledMM on CUDA and ROCm (symmetric inputs).
- vllm/model_executor/layers/quantization/fp8.py @ 1436674 — online fp8: ``get_min_capability`` 80,
  FP8 Marlin below 89, no Marlin on ROCm.
- docs/features/quantization/fp8.md @ 405f4e1 — online fp8 loads the model at full precision first.
- vllm/model_executor/layers/quantization/bitsandbytes.py @ 5a6541d — min 70.
- vllm/platforms/rocm.py @ e2a00c7 — ROCm quantizations: compressed-tensors and fp8, not
  bitsandbytes on gfx9 (MI300X is gfx942).
- docs/features/quantization/README.md @ 50feac9 — hardware table (INT8 W8A8 on x86 CPU; FP8 W8A8
  on Ada, Hopper, AMD); https://docs.vllm.ai/en/v0.12.0/getting_started/installation/cpu/ — x86
  CPU serves FP32, FP16 and BF16.

FP8 per-tensor and block, and FP4 (compressed-tensors ``FP8``, ``FP8_BLOCK``, ``NVFP4``, ``NVFP4A16`` and
``MXFP4`` presets), verified against vllm-project/vllm:
- .../compressed_tensors/compressed_tensors.py @ be69645 — ``_is_fp8_w8a8`` takes tensor, channel and
  block weights with dynamic activations, or static per-tensor activations; below 8.9 the scheme becomes
  CompressedTensorsW8A16Fp8. ``_is_fp4a4_nvfp4`` (tensor_group, group 16, FP4 weights and activations)
  becomes CompressedTensorsW4A4Fp4 where ``cutlass_fp4_supported()``, otherwise CompressedTensorsW4A16Fp4
  (weight-only FP4 Marlin) with the warning "Current platform does not support cutlass NVFP4";
  ``_is_fp4a16_nvfp4`` (no input activations) is always CompressedTensorsW4A16Fp4.
- .../compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py @ de4766a (per-tensor: static input scale,
  e4m3fnuz on ROCm; a fused QKV/MLP module's per-tensor weight scales are requantized to their maximum, a
  small rounding difference from the checkpoint) and @ 00cb05c (block: min 89, activations quantized at
  run time per 1x128 group, ``W8A8BlockFp8LinearOp``).
- .../compressed_tensors/schemes/compressed_tensors_w8a16_fp8.py @ aa63715 — the weight-only fallback takes
  channel and tensor scales only: below 8.9 a block checkpoint has no FP8 path at all.
- vllm/model_executor/kernels/linear/__init__.py @ 055e47c — ``_POSSIBLE_FP8_BLOCK_KERNELS``: ROCm has
  AITER and Triton block kernels (vllm/platforms/rocm.py @ e2a00c7: FP8 on gfx94x/gfx95x, e4m3fnuz on gfx94x).
- vllm/utils/deep_gemm.py @ 779d1fc — with the optional ``deep_gemm`` package installed, Hopper and
  Blackwell block FP8 goes through DeepGEMM and ``VLLM_USE_DEEP_GEMM_E8M0`` rounds the block scales up to
  powers of two (UE8M0), not the FP32 scales that were measured: the launch note says to set
  ``VLLM_USE_DEEP_GEMM=0``.
- csrc/libtorch_stable/quantization/fp4/nvfp4_scaled_mm_entry.cu @ 926ab02 — ``cutlass_scaled_mm_supports_fp4``:
  CUDA >= 12.8 and capability 10.x-11.x (sm100a kernels) or 12.x (sm120a kernels); nothing below 10.0.
- .../compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py @ 0094cb9 — static input global scale
  from the checkpoint, FP4 activations and FP8 group-16 scales computed at run time (the measured NVFP4).
- https://docs.vllm.ai/projects/llm-compressor/en/stable/examples/quantization_w4a4_fp4/ — "if running
  inference on a machine that is < SM100, vLLM will not run activation quantization, only weight-only".
- .../compressed_tensors/schemes/compressed_tensors_w4a16_nvfp4.py @ 17b6501 — NVFP4A16 through FP4
  Marlin, min 75 (vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py @ 00d52e9:
  ``is_fp4_marlin_supported`` 7.5, CUDA kernels); FP4 weights times 16-bit activations is the measured
  NVFP4A16 on every GPU, Blackwell included.
- vllm/model_executor/kernels/linear/__init__.py @ 055e47c — ``_POSSIBLE_NVFP4_KERNELS``: ROCm has only
  ``EmulationNvFp4LinearKernel`` (dequantize, then a 16-bit matmul), so no AMD row for NVFP4.
  ``_POSSIBLE_MXFP4_KERNELS``: CUDA ``FlashInferMxFp4LinearKernel`` first, then Marlin; ROCm
  ``AiterMxfp4LinearKernel``, then emulation.
- .../kernels/linear/mxfp4/flashinfer.py @ 055e47c — MXFP4 W4A4: activations quantized to MXFP4 at run
  time (group 32), FlashInfer CUTLASS/CuTe-DSL GEMM, needs capability >= 10.0 and FlashInfer's CuTe-DSL;
  .../mxfp4/marlin.py @ 1644f0f — Marlin is weight-only ("the requested activation quantization is
  ignored"); .../compressed_tensors/schemes/compressed_tensors_w4a4_mxfp4.py @ 0c4f7c6 — the
  ``mxfp4-pack-quantized`` scheme (E2M1 weights, E8M0 group-32 scales) takes its kernel from
  ``init_mxfp4_linear_kernel`` (that registry; at 0c4f7c6 it still listed no CUDA MXFP4 kernel).
  Older releases serve MXFP4 checkpoints weight-only on every GPU (scheme @ ac2c039 dequantizes the weights
  and leaves the activations unquantized; https://docs.vllm.ai/projects/llm-compressor/en/0.10.0/experimental/mxfp4/
  "this pathway has not yet been enabled for compressed-tensors models in vLLM"), so serve ct-mxfp4 with a
  recent vLLM.
- vllm/platforms/rocm.py @ e2a00c7 — ``supports_mx`` is gfx95x only: native MXFP4 runs on MI350X/MI355X (gfx950),
  not on MI300X/MI325X (gfx942), which get the emulation; the ROCm path and its sources: ``vllm_rocm.py``.

ModelOpt checkpoints (``recommender/quantize/modelopt.py``), verified against vllm-project/vllm:
- vllm/model_executor/layers/quantization/modelopt.py @ 00155cd — ``QUANT_ALGOS`` FP8, FP8_PER_CHANNEL_PER_TOKEN,
  FP8_PB_WO, NVFP4, W4A16_NVFP4, MXFP8, MIXED_PRECISION: no W4A16_AWQ, so no mo-w4a16-awq row. The config is read
  from config.json's ``quantization_config`` (``quant_method: modelopt``) or ``hf_quant_config.json``.
  ``ModelOptFp8Config`` (``get_name`` "modelopt", ``get_min_capability`` 89, no weight-only fallback):
  ``ModelOptFp8LinearMethod`` runs per-tensor weights with the static per-tensor ``input_scale``
  (kFp8StaticTensorSym); a fused QKV/MLP module's weight scales are requantized to their maximum and its
  input scales reduced to their maximum (ModelOpt's export already gives fused inputs one scale).
  ``ModelOptKVCacheMethod`` loads the checkpoint's k_scale/v_scale. ``ModelOptNvFp4Config`` ("modelopt_fp4",
  min 75): ``ModelOptNvFp4LinearMethod`` takes its kernel from ``init_nvfp4_linear_kernel`` — the W4A4 CUTLASS/
  FlashInfer GEMM from 10.0, FP4 Marlin (weight-only) below — with the static global ``input_scale`` and FP4
  activations quantized at run time; ``override_quantization_method`` picks "modelopt" / "modelopt_fp4" from the
  checkpoint's quant_algo, the names the flags below give.

AMD Quark FP8 checkpoints (``recommender/quantize/quark.py``), verified against vllm-project/vllm:
- vllm/model_executor/layers/quantization/quark/quark.py @ 006bce4 — ``QuarkConfig`` ("quark", min 70) reads
  config.json's ``quantization_config``; ``_is_fp8_w8a8``: static fp8_e4m3 weights per tensor or channel, static
  per-tensor or dynamic activations -> ``QuarkW8A8Fp8`` where capability >= its minimum, else no Quark scheme
  matches (NotImplementedError: no weight-only fallback). .../quark/schemes/quark_w8a8_fp8.py @ 037cffe — min
  89; on gfx94x (``is_fp8_fnuz``) e4m3fn weights become e4m3fnuz with doubled scales (the same values; the
  activation clamp moves from 448 to 480 scales); a fused module's per-tensor weight scales are requantized to
  their maximum, its input scales reduced to their maximum. vllm/platforms/rocm.py @ 001eda3 —
  ``supported_quantization`` holds "quark"; gfx942 (MI300X) reports capability 9.4.

How it batches (``PROFILE``, for the scheduler simulation; defaults of the releases the measured runs used, read
in the released sources):

* vLLM 0.12 (V1 engine): chunked prefill on for decoder LLMs; the scheduler has "no decoding phase
  nor prefill phase": running requests, then waiting ones, share one token budget per step
  (vllm/v1/core/sched/scheduler.py). `vllm serve` on a GPU with >= 70 GiB that is not an A100
  defaults to max_num_batched_tokens 8192 and max_num_seqs 1024 (vllm/engine/arg_utils.py,
  `get_batch_defaults` in 0.12, `_set_default_args` in 0.11: `OPENAI_API_SERVER: 8192`).
* vLLM's measured runs (shared/calibration, vLLM 0.12, AIConfigurator's harness, whose 0.12 launch
  template passes no ``--max-num-batched-tokens``) do not show the lockstep waves an 8192-token step
  gives a closed loop of fixed lengths: eight 1024-token prompts arriving together would share one
  ~440 ms step on two H100s, and the runs measured a mean TTFT of 154 ms. Replayed with at most 4096
  tokens per step (``step_budget_cap``), the held-out vLLM group's TTFT error falls from 31 % to 15 %
  (median) and 121 % to 30 % (P90), and its TPOT error from 8.9 % to 7.3 %
  (benchmarks/gpu_fidelity.py). The cap stands in for what the runs show and the source does not
  explain: a wave of simultaneous arrivals reaches vLLM's scheduler over several steps (its API server
  and engine core are separate processes). It was chosen among 1024, 2048, 3072, 4096, 6144 and 8192
  by the same cross-validation (2048-4096 fit alike; mild selection bias), and it applies to every
  vLLM prediction, so the search and ``estimate`` see vLLM as the calibration did.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import yaml

from recommender.engines._base import (
    Engine,
    EngineLaunch,
    LaunchSettings,
    Option,
    check_choice,
    flatten,
)
from recommender.engines.kernels import FP8_W8A16_FALLBACK, Kernel
from recommender.engines.vllm_notes import kv_cache_notes, quantization_notes, token_budget_notes
from recommender.engines.vllm_parallel import expert_parallel_notes, parallel_options, parallel_refusal
from recommender.engines.vllm_rocm import AITER_ON
from recommender.perf.sim.engine_profiles import EngineProfile
from recommender.speculation.methods import parse_speculative

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

# vllm/model_executor/layers/quantization/__init__.py @ 05d9095, QuantizationMethods.
QUANTIZATION_CHOICES = frozenset(
    {
        "awq",
        "fp8",
        "ptpc_fp8",
        "fbgemm_fp8",
        "fp_quant",
        "modelopt",
        "modelopt_fp4",
        "bitblas",
        "gguf",
        "gptq_marlin_24",
        "gptq_marlin",
        "gptq_bitblas",
        "awq_marlin",
        "gptq",
        "compressed-tensors",
        "bitsandbytes",
        "experts_int8",
        "ipex",
        "quark",
        "moe_wna16",
        "torchao",
        "inc",
        "mxfp4",
        "mxfp8",
        "petit_nvfp4",
        "cpu_awq",
    }
)
# vllm/config/cache.py @ c1d8642: "fp8" is e4m3 on CUDA and ROCm.
KV_CACHE_DTYPE = {"auto": "auto", "fp8": "fp8"}


#: What vLLM runs for an FP8 block checkpoint below 8.9 (compressed_tensors_w8a16_fp8.py @ aa63715).
FP8_BLOCK_FALLBACK = (
    "its weight-only FP8 Marlin scheme (W8A16) refuses 128x128 block scales, so there is no FP8 path at all"
)
#: What vLLM runs for an NVFP4 W4A4 checkpoint below 10.0 (compressed_tensors.py @ be69645).
NVFP4_FALLBACK = "it runs NVFP4 weight-only through FP4 Marlin (W4A16), not the W4A4 numerics that were measured"
#: What vLLM runs for an MXFP4 W4A4 checkpoint below 10.0 (kernels/linear/__init__.py @ 055e47c).
MXFP4_FALLBACK = "it runs MXFP4 weight-only through FP4 Marlin (W4A16), not the W4A4 numerics that were measured"

#: How Vllm batches (sources in the module docstring).
PROFILE = EngineProfile(
    "vllm", max_num_batched_tokens=8192, mixed_prefill=True, max_num_seqs=1024, step_budget_cap=4096
)
#: Where Vllm runs each scheme family (sources in the module docstring).
KERNELS: tuple[Kernel, ...] = (
    Kernel("bf16", "vLLM bf16", (8, 0), amd=True, cpu=True),
    Kernel("fp16", "vLLM fp16", (7, 0), amd=True, cpu=True),
    Kernel("ct-fp8-w8a8", "vLLM's CompressedTensorsW8A8Fp8", (8, 9), amd=True, fallback=FP8_W8A16_FALLBACK),
    Kernel("ct-int8-w8a8", "vLLM's CUTLASS INT8 W8A8", (7, 5), nvidia_below=(10, 0), amd=True, cpu=True),
    Kernel("ct-w4a16", "vLLM's Marlin W4A16", (7, 5)),
    Kernel("ct-w4a16-asym", "vLLM's Marlin W4A16 with zero points", (7, 5)),
    Kernel(
        "online-fp8",
        "vLLM's online fp8 (W8A8)",
        (8, 9),
        amd=True,
        load_bits_per_weight=16.0,
        fallback=FP8_W8A16_FALLBACK,
        flag="fp8",
    ),
    Kernel("bnb-nf4", "vLLM's bitsandbytes NF4", (7, 0), flag="bitsandbytes"),
    Kernel(
        "ct-fp8-tensor",
        "vLLM's CompressedTensorsW8A8Fp8 (per-tensor, static activation scale)",
        (8, 9),
        amd=True,
        fallback=FP8_W8A16_FALLBACK,
    ),
    Kernel(
        "ct-fp8-block",
        "vLLM's CompressedTensorsW8A8Fp8 (128x128 blocks, FP32 scales)",
        (8, 9),
        amd=True,
        fallback=FP8_BLOCK_FALLBACK,
    ),
    Kernel("ct-nvfp4", "vLLM's CUTLASS/FlashInfer NVFP4 W4A4", (10, 0), fallback=NVFP4_FALLBACK),
    Kernel("ct-nvfp4a16", "vLLM's FP4 Marlin (NVFP4 weight-only)", (7, 5)),
    Kernel(
        "ct-mxfp4",
        "vLLM's MXFP4 W4A4 (FlashInfer on CUDA, AITER on gfx950)",
        (10, 0),
        amd=True,
        amd_archs=("gfx950",),
        amd_env=(AITER_ON,),
        fallback=MXFP4_FALLBACK,
    ),
    Kernel("mo-fp8", "vLLM's ModelOptFp8LinearMethod (per-tensor, static activation scale)", (8, 9), flag="modelopt"),
    Kernel(
        "mo-nvfp4",
        "vLLM's ModelOptNvFp4LinearMethod (NVFP4 W4A4)",
        (10, 0),
        fallback=NVFP4_FALLBACK,
        flag="modelopt_fp4",
    ),
    Kernel("quark-fp8", "vLLM's QuarkW8A8Fp8 (per-tensor, static activation scale)", (8, 9), amd=True, flag="quark"),
)


class VllmEngine(Engine):
    """``vllm serve`` with the settings as flags, plus the same settings as a ``--config`` YAML."""

    name = "vllm"
    label = "vLLM"
    sources = (
        "https://github.com/vllm-project/vllm/blob/99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b/vllm/engine/arg_utils.py",
        "https://github.com/vllm-project/vllm/blob/c1d86421174a87056edc90a41dc9942391509e84/vllm/config/cache.py",
        "https://github.com/vllm-project/vllm/blob/05d909563e1d1ada39a13b67e7b9a4cbca1d6a8e/"
        "vllm/model_executor/layers/quantization/__init__.py",
        "https://github.com/vllm-project/vllm/blob/c9e9c484932eb025a29752972a29047802bc1bbb/"
        "vllm/model_executor/model_loader/bitsandbytes_loader.py",
        "https://github.com/vllm-project/vllm/blob/405f4e1f24aff3c057a3117d7a0f2b5e5c02ead7/"
        "docs/features/quantization/fp8.md",
        "https://github.com/vllm-project/vllm/blob/1436674bcb3f46f4c960d09334cf7dd1534943ca/"
        "vllm/model_executor/layers/quantization/fp8.py",
        "https://github.com/vllm-project/vllm/blob/4ad14044b2546e9b374cf57de5070746f30f2890/"
        "docs/features/quantization/llm_compressor/int8_w8a8.md",
        "https://docs.vllm.ai/en/latest/features/quantization/bnb/",
        "https://docs.vllm.ai/en/latest/configuration/serve_args/",
        "https://github.com/vllm-project/vllm/pull/23014",
        "https://github.com/vllm-project/vllm/blob/00155cdecca722d98e34234c3d172725b7720b7d/"
        "vllm/model_executor/layers/quantization/modelopt.py",
        "https://github.com/vllm-project/vllm/blob/006bce4ebff558210f0d2e0b6da1582268144d4f/"
        "vllm/model_executor/layers/quantization/quark/quark.py",
        "https://github.com/vllm-project/vllm/blob/037cffecfe40b0486a9506f86bd7d36f2035f0ff/"
        "vllm/model_executor/layers/quantization/quark/schemes/quark_w8a8_fp8.py",
        "https://github.com/vllm-project/vllm/blob/001eda31e3d032e9dc864e97f3630358b2ff8b5a/vllm/platforms/rocm.py",
        "https://github.com/vllm-project/vllm/blob/main/docs/features/spec_decode/n_gram.md",
        "https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/ngram_proposer.py",
    )
    kernels = KERNELS
    profile = PROFILE
    speculation_refusal = ""  # n-gram prompt lookup is vLLM's own proposer, replayed in recommender/speculation
    expert_parallel_refusal = ""  # data-parallel attention and expert parallelism: vllm_parallel.py

    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch:
        if why := parallel_refusal(settings):
            return self._unsupported(f"vLLM's expert-parallel command is not emitted: {why}.")
        parallel, switches = parallel_options(settings)
        options: list[Option] = []
        if flag:
            check_choice(self.label, "--quantization", flag, QUANTIZATION_CHOICES)
            options.append(("--quantization", flag))
        options += [
            ("--dtype", settings.dtype),
            ("--kv-cache-dtype", KV_CACHE_DTYPE[settings.kv_cache_dtype]),
            ("--max-num-seqs", settings.max_num_seqs),
            ("--max-num-batched-tokens", settings.max_num_batched_tokens),
            *parallel,
            ("--gpu-memory-utilization", settings.gpu_memory_utilization),
            ("--max-model-len", settings.max_model_len),
            ("--port", settings.port),
            *_speculative_options(settings.speculative),
        ]
        document: dict[str, object] = {"model": settings.model}
        document |= {option.removeprefix("--"): value for option, value in options}
        document |= {switch.removeprefix("--"): True for switch in switches}
        notes = [
            *expert_parallel_notes(settings),
            *quantization_notes(settings.method, flag, rocm=bool(self.rocm_env(settings))),
            *kv_cache_notes(settings.kv_cache_dtype),
            *token_budget_notes(settings),
            "config_yaml holds the same settings: save it as config.yaml and run `vllm serve --config config.yaml` "
            "(values given on the command line override the file).",
        ]
        return self._config(
            command=[*self.rocm_env(settings), "vllm", "serve", settings.model, *flatten(options), *switches],
            config_yaml=yaml.safe_dump(document, sort_keys=False),
            notes=notes,
        )

    def no_equivalent_hint(self, method: QuantScheme) -> str:
        if method.library == "bitsandbytes":
            return (
                "vLLM's in-flight `--quantization bitsandbytes` always quantizes to 4-bit NF4; it serves "
                f"{method.name}'s format only from a checkpoint saved pre-quantized with bitsandbytes "
                "(read from its quantization_config, tensor parallel 1) — save one with transformers and serve "
                "that, or pick a method with a vLLM equivalent"
            )
        if method.library == "torchao":
            return (
                "its only torchao route is `--quantization torchao` with the torchao config supplied: a checkpoint "
                "saved with torchao, or (vLLM with PR #23014) `--hf-overrides` carrying quantization_config_dict_json "
                "from torchao's config_to_dict — check it on your vLLM version (issue #31668), or pick a method "
                "with a vLLM equivalent"
            )
        if method.kernel_family == "mo-w4a16-awq":
            return (
                "vLLM's ModelOpt loader takes FP8, NVFP4 and MXFP8 algorithms, not W4A16_AWQ "
                "(QUANT_ALGOS in vllm/model_executor/layers/quantization/modelopt.py) — serve it with trtllm, or pick "
                "w4a16-awq-g128 (compressed-tensors) for vLLM"
            )
        return super().no_equivalent_hint(method)


def _speculative_options(speculative: str) -> list[Option]:
    """``--speculative-config`` for vLLM's n-gram proposer (docs/features/spec_decode/n_gram.md; keys and defaults in
    vllm/config/speculative.py): every key given, as measured (``num_speculative_tokens`` has no default)."""
    method = parse_speculative(speculative)
    if method is None:
        return []
    config = {
        "method": "ngram",
        "num_speculative_tokens": method.k,
        "prompt_lookup_max": method.max_n,
        "prompt_lookup_min": method.min_n,
    }
    return [("--speculative-config", json.dumps(config, separators=(",", ":")))]
