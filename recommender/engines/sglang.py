"""SGLang: ``python -m sglang.launch_server --model-path MODEL ...``.

Verified against (flag names, accepted values, behaviour quoted in the notes):

- python/sglang/srt/server_args.py @ 001067f — ``--model-path``, ``--dtype``, ``--quantization``
  (``QUANTIZATION_CHOICES``), ``--load-format`` (``LOAD_FORMAT_CHOICES``), ``--kv-cache-dtype``
  (``fp8_e4m3``/``fp8_e5m2``, no bare ``fp8``; scales default to 1.0 without
  ``--quantization-param-path``), ``--mem-fraction-static`` (weights + KV pool),
  ``--max-running-requests``, ``--chunked-prefill-size``, ``--max-prefill-tokens``,
  ``--context-length``; ``--tp-size`` and ``--port`` in the same file's earlier versions.
- docs/advanced_features/quantization.md @ 15dd13e — ``python3 -m sglang.launch_server``; online
  ``--quantization fp8``; bitsandbytes online quantization listed as upcoming.
- python/sglang/srt/model_loader/loader.py @ 4632493 — ``BitsAndBytesModelLoader`` (chosen by
  ``--load-format bitsandbytes``) quantizes 16-bit weights in flight with
  ``quantize_4bit(compress_statistics=True, quant_type="nf4")``; LLM.int8 only pre-quantized.
- python/sglang/srt/layers/quantization/fp8.py @ d94a153 — online fp8 quantizes weights per output
  channel where the CUTLASS FP8 or FP8 Marlin kernels run, per tensor otherwise: not the per-tensor
  numerics fp8-online measures, so SGLang has no fp8-online (it has no online-fp8 row).
- docs/advanced_features/quantization.md @ 15dd13e — a checkpoint quantized offline needs no
  ``--quantization``: the method is parsed from its config.json.
- sgl-project/sglang PR #34304 — ``--torchao-config`` removed (broken since 2026-04 with torchao 0.17).

Where it runs each scheme family (``KERNELS``), verified against sgl-project/sglang:
- python/sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py @ b553569 — FP8
  W8A8 below 8.9 becomes W8A16 FP8 (Marlin).
- .../compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py @ 787a422 — min 89; e4m3fnuz on ROCm.
- .../compressed_tensors/schemes/compressed_tensors_w8a8_int8.py @ 9c763c9 — min 89 (sgl-kernel
  CUTLASS int8, CUDA only).
- .../compressed_tensors/schemes/compressed_tensors_wNa16.py @ b4ea46f — Marlin, min 80, repacked
  with sgl-kernel on CUDA only, zero points; PR #25292 (asymmetric weights dispatched, 2026-05).
- python/sglang/srt/layers/quantization/fp8.py @ d94a153 — online fp8 quantizes weights per output
  channel where CUTLASS FP8 runs: not vLLM's per-tensor numerics that fp8-online measures.
- python/sglang/srt/layers/quantization/bitsandbytes.py @ b53daee — min 70.
- docs/advanced_features/quantization.md @ 15dd13e — pre-quantized checkpoints need no
  ``--quantization``: the method is parsed from config.json.

FP8 per-tensor and block, and FP4 (compressed-tensors ``FP8``, ``FP8_BLOCK``, ``NVFP4``, ``NVFP4A16`` and
``MXFP4`` presets), verified against sgl-project/sglang:
- .../compressed_tensors/compressed_tensors.py @ 64f78fd — ``_is_fp8_w8a8`` takes tensor, channel and block
  weights (dynamic activations, or static symmetric per-tensor ones) into CompressedTensorsW8A8Fp8 from 8.9,
  CompressedTensorsW8A16Fp8 below; ``_is_fp4a4_nvfp4`` (tensor_group, group 16) becomes
  CompressedTensorsW4A4Fp4, or on a GPU that is not Blackwell the weight-only FP4 Marlin
  CompressedTensorsW4A4MarlinFp4 (``should_use_fp4_marlin_fallback``; schemes/compressed_tensors_w4a4_nvfp4_marlin.py
  @ 64f78fd: "Marlin FP4 fallback", CUDA only). The dense dispatch has no NVFP4A16 (weight-only, no
  input activations) and no MXFP4 branch: both raise "No compressed-tensors compatible scheme was found"
  (an earlier dispatch, @ b01291f, sent NVFP4A16 to FP4 Marlin; the current one does not), so SGLang has no
  ct-nvfp4a16 and no ct-mxfp4 row.
- .../compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py @ 0541d3b — min 100; the checkpoint's
  static input global scale, FP4 activations and FP8 group-16 scales computed at run time (``fp4_quantize``,
  ``fp4_gemm``): the measured NVFP4. python/sglang/srt/utils/common.py @ 4e75f46 — ``is_blackwell_supported``:
  major 10 or 12 with CUDA >= 12.8 (an 11.x GPU would get the Marlin fallback).
- .../compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py @ 787a422 — per-tensor weights with a
  static per-tensor input scale, e4m3fnuz on ROCm; a fused module's per-tensor weight scales are
  requantized to their maximum (a small rounding difference from the checkpoint).
- python/sglang/srt/layers/deep_gemm_wrapper/configurer.py @ 55db869 — with DeepGEMM (bundled, on by
  default from 9.0) on Blackwell (major 10 or 12) ``DEEPGEMM_SCALE_UE8M0``: block FP8 runs with power-of-two
  scales, not the FP32 scales that were measured, so the block row stops at 10.0 (Hopper's DeepGEMM keeps
  FP32 scales). The block path on ROCm is not verified here: no AMD row for ct-fp8-block.

ModelOpt checkpoints (``recommender/quantize/modelopt.py``), verified against sgl-project/sglang:
- python/sglang/srt/layers/quantization/modelopt_quant.py @ faeb968 — ``ModelOptFp8Config`` (``get_name``
  "modelopt_fp8", ``get_min_capability`` 89) reads the flat config.json ``quantization_config`` (``quant_algo``,
  ``kv_cache_scheme``, ``ignore``) or the nested hf_quant_config.json; ``override_quantization_method`` turns
  ``--quantization modelopt`` into modelopt_fp8 or modelopt_fp4 by quant_algo (the flag given below).
  ``ModelOptFp8LinearMethod``: per-tensor weights requantized to a fused module's maximum scale, the static
  ``input_scale`` (its maximum over fused modules); ``ModelOptFp8KVCacheMethod`` loads k_scale/v_scale.
  No W4A16_AWQ config, so no mo-w4a16-awq row.
- the same file @ 003ca3e — ``ModelOptFp4LinearMethod``: FP4 activations quantized at run time
  (``scaled_fp4_quant`` with the inverse of the static ``input_scale``) into ``cutlass_scaled_fp4_mm``, and the
  NVFP4 MoE method refuses anything below Blackwell ("Please use Blackwell and above"): NVFP4 from 10.0.

How it batches (``PROFILE``, for the scheduler simulation; defaults of the releases the measured runs used, read
in the released sources):

* SGLang 0.5: `chunked_prefill_size` 8192 on 60-90 GB and 90-160 GB GPUs (H100, H200), 16384
  above (sglang/srt/server_args.py `_handle_gpu_memory_settings`); `enable_mixed_chunk` False,
  so a prefill batch runs without the decode batch (sglang/srt/managers/scheduler.py mixes
  only `if self.is_mixed_chunk`); `max_running_requests` is derived from the KV pool.

An expert-parallel replica (``LaunchSettings.expert_parallel``), verified against sgl-project/sglang:
- python/sglang/srt/server_args.py @ 001067f — ``--tp-size`` (the replica's GPUs), ``--ep-size`` (aliases
  ``--expert-parallel-size``, ``--ep``), ``--enable-dp-attention`` ("data parallelism for attention and tensor
  parallelism for FFN") with ``--dp-size``, ``--ep-num-redundant-experts`` with ``--enable-eplb``,
  ``--moe-a2a-backend`` (default ``none``; ``deepep`` needs DeepEP installed), and for several nodes ``--nnodes``,
  ``--node-rank``, ``--dist-init-addr`` ("e.g. 192.168.0.2:25000").
- python/sglang/srt/layers/dp_attention.py (``compute_dp_attention_world_info``) — ``attn_tp_size = tp_size //
  dp_size``: each attention rank is ``tp / dp`` GPUs.
- python/sglang/srt/managers/tp_worker.py @ 4f34e24 — ``max_running_requests // (dp_size if enable_dp_attention
  else 1)``: --max-running-requests is the replica's, so the command gives the batch per rank times the ranks.
- server_args.py ``_handle_data_parallelism`` (as read in 2026 versions of the file) — with DP attention
  ``chunked_prefill_size = chunked_prefill_size // dp_size``: the command multiplies the per-rank budget back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.engines._base import (
    Engine,
    EngineLaunch,
    LaunchSettings,
    Option,
    check_choice,
    checkpoint_note,
    double_quant_note,
    flatten,
)
from recommender.engines.expert_parallel import HEAD_NODE_ADDRESS
from recommender.engines.kernels import FP8_W8A16_FALLBACK, Kernel
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

# python/sglang/srt/server_args.py @ 001067f, QUANTIZATION_CHOICES.
QUANTIZATION_CHOICES = frozenset(
    {
        "awq",
        "fp8",
        "mxfp8",
        "gptq",
        "marlin",
        "gptq_marlin",
        "awq_marlin",
        "bitsandbytes",
        "gguf",
        "modelopt",
        "modelopt_fp8",
        "modelopt_fp4",
        "nvfp4_online",
        "modelopt_mixed",
        "petit_nvfp4",
        "w8a8_int8",
        "w8a8_fp8",
        "moe_wna16",
        "w4afp8",
        "mxfp4",
        "auto-round",
        "auto-round-int8",
        "compressed-tensors",
        "modelslim",
        "mxfp_w4a8",
        "quark",
        "quark_int4fp8_moe",
        "quark_mxfp4",
        "mlx_q4",
        "mlx_q8",
        "unquant",
        "humming",
    }
)
# server_args.py @ 001067f: SGLang names the formats; e4m3 matches vLLM's "fp8" and TGI's fp8_e4m3fn.
KV_CACHE_DTYPE = {"auto": "auto", "fp8": "fp8_e4m3"}


#: What SGLang runs for an FP8 block checkpoint below 8.9 (compressed_tensors.py @ 64f78fd).
FP8_BLOCK_FALLBACK = "it takes its weight-only FP8 scheme (W8A16), not the W8A8 numerics that were measured"
#: What SGLang runs for an NVFP4 W4A4 checkpoint below Blackwell (compressed_tensors.py @ 64f78fd).
NVFP4_FALLBACK = "it runs NVFP4 weight-only through FP4 Marlin (W4A16), not the W4A4 numerics that were measured"

#: How Sglang batches (sources in the module docstring).
PROFILE = EngineProfile(
    "sglang", max_num_batched_tokens=8192, mixed_prefill=False, max_num_seqs=1024, reserve_whole_request=True
)
#: Where Sglang runs each scheme family (sources in the module docstring).
KERNELS: tuple[Kernel, ...] = (
    Kernel("bf16", "SGLang bf16", (8, 0), amd=True),
    Kernel("fp16", "SGLang fp16", (7, 5), amd=True),
    Kernel("ct-fp8-w8a8", "SGLang's CompressedTensorsW8A8Fp8", (8, 9), amd=True, fallback=FP8_W8A16_FALLBACK),
    Kernel("ct-int8-w8a8", "SGLang's sgl-kernel INT8 W8A8", (8, 9)),
    Kernel("ct-w4a16", "SGLang's Marlin W4A16", (8, 0)),
    Kernel("ct-w4a16-asym", "SGLang's Marlin W4A16 with zero points", (8, 0)),
    Kernel("bnb-nf4", "SGLang's bitsandbytes NF4", (7, 0), flag="bitsandbytes"),
    Kernel(
        "ct-fp8-tensor",
        "SGLang's CompressedTensorsW8A8Fp8 (per-tensor, static activation scale)",
        (8, 9),
        amd=True,
        fallback=FP8_W8A16_FALLBACK,
    ),
    Kernel(
        "ct-fp8-block",
        "SGLang's CompressedTensorsW8A8Fp8 (128x128 blocks, FP32 scales; UE8M0 on Blackwell)",
        (8, 9),
        nvidia_below=(10, 0),
        fallback=FP8_BLOCK_FALLBACK,
    ),
    Kernel("ct-nvfp4", "SGLang's CompressedTensorsW4A4Fp4 (FP4 GEMM)", (10, 0), fallback=NVFP4_FALLBACK),
    Kernel("mo-fp8", "SGLang's ModelOptFp8LinearMethod (per-tensor, static activation scale)", (8, 9), flag="modelopt"),
    Kernel("mo-nvfp4", "SGLang's ModelOptFp4LinearMethod (CUTLASS FP4 GEMM)", (10, 0), flag="modelopt"),
)


class SglangEngine(Engine):
    """``python -m sglang.launch_server`` with SGLang's names for the launch settings."""

    name = "sglang"
    label = "SGLang"
    sources = (
        "https://github.com/sgl-project/sglang/blob/001067fffe33427bee0ed2f007fb7551a1d76b44/"
        "python/sglang/srt/server_args.py",
        "https://github.com/sgl-project/sglang/blob/15dd13e18eed8c4556bf9cd6d17f355182071d3b/"
        "docs/advanced_features/quantization.md",
        "https://github.com/sgl-project/sglang/blob/4632493515f269ad6749a13abe1b28fa3ae6d710/"
        "python/sglang/srt/model_loader/loader.py",
        "https://github.com/sgl-project/sglang/blob/d94a1535900da43cb374c2445679375e78935af6/"
        "python/sglang/srt/layers/quantization/fp8.py",
        "https://github.com/sgl-project/sglang/pull/34304",
        "https://github.com/sgl-project/sglang/blob/faeb96856c4417d55695feec2f4d2463c8adb7fd/"
        "python/sglang/srt/layers/quantization/modelopt_quant.py",
        "https://github.com/sgl-project/sglang/blob/003ca3e5152c94c92d88fd43d5eb58e55201e895/"
        "python/sglang/srt/layers/quantization/modelopt_quant.py",
    )
    kernels = KERNELS
    profile = PROFILE
    speculation_refusal = (
        "SGLang's NGRAM algorithm (--speculative-algorithm NGRAM, docs/advanced_features/speculative_decoding.md) "
        "drafts from a trie of earlier n-grams with a BFS over matches (window 1-12, 12 draft tokens), not vLLM's "
        "prompt lookup, and turns off the overlap scheduler and mixed chunked prefill; its acceptance was not "
        "measured"
    )
    expert_parallel_refusal = ""  # ``_parallel_options`` below

    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch:
        parallel, switches = _parallel_options(settings)
        ranks = settings.expert_parallel.attention_dp if settings.expert_parallel is not None else 1
        options: list[Option] = []
        if flag:
            check_choice(self.label, "--quantization", flag, QUANTIZATION_CHOICES)
            options.append(("--quantization", flag))
            if flag == "bitsandbytes":
                # The loader, not the quantization config, does in-flight quantization.
                options.append(("--load-format", "bitsandbytes"))
        options += [
            ("--dtype", settings.dtype),
            ("--kv-cache-dtype", KV_CACHE_DTYPE[settings.kv_cache_dtype]),
            *parallel,
            ("--max-running-requests", settings.max_num_seqs * ranks),
            ("--chunked-prefill-size", settings.max_num_batched_tokens * ranks),
            ("--max-prefill-tokens", settings.max_num_batched_tokens),
            ("--mem-fraction-static", settings.gpu_memory_utilization),
            ("--context-length", settings.max_model_len),
            ("--port", settings.port),
        ]
        notes = [
            *_expert_parallel_notes(settings),
            *_quantization_notes(settings.method, flag),
            *_kv_cache_notes(settings.kv_cache_dtype),
            "--chunked-prefill-size and --max-prefill-tokens bound the prefill tokens of one forward pass; SGLang "
            "runs decode in separate passes unless --enable-mixed-chunk, so the budget is not vLLM's per-step "
            "prefill + decode budget.",
            "--mem-fraction-static covers weights plus the KV pool only (activations and CUDA graphs use the rest), "
            "so the same fraction leaves SGLang a little more headroom than vLLM's --gpu-memory-utilization.",
            "SGLang listens on 127.0.0.1 unless --host is given (e.g. --host 0.0.0.0).",
        ]
        command = ["python", "-m", "sglang.launch_server", "--model-path", settings.model, *flatten(options), *switches]
        return self._config(command=command, notes=notes)

    def no_equivalent_hint(self, method: QuantScheme) -> str:
        if method.library == "bitsandbytes":
            return (
                "SGLang's bitsandbytes loader quantizes 16-bit weights in flight to 4-bit NF4 only; "
                f"{method.name}'s format loads only from a checkpoint saved pre-quantized with bitsandbytes — "
                "serve one, or pick a method with an SGLang equivalent"
            )
        if method.library == "torchao":
            alternative = (
                "it serves int4 from pre-quantized GPTQ or AWQ checkpoints"
                if method.precision == "int4"
                else "it serves int8 only as W8A8 from a pre-quantized checkpoint (--quantization w8a8_int8)"
            )
            return (
                "SGLang's only torchao route, --torchao-config, was removed (PR #34304) after it had failed for "
                f"every value since torchao 0.17; {alternative} — pick a method with an SGLang equivalent"
            )
        return super().no_equivalent_hint(method)


def _quantization_notes(method: QuantScheme, flag: str) -> list[str]:
    checkpoint = checkpoint_note(method, "SGLang", flag)
    if checkpoint is not None:
        return [checkpoint]
    if flag == "bitsandbytes":
        notes = [
            "SGLang quantizes in flight to 4-bit NF4 through its bitsandbytes loader (--load-format bitsandbytes); "
            "its quantization guide still lists bitsandbytes online quantization as upcoming, so confirm it on "
            "your SGLang version and model class before relying on it.",
        ]
        double_quant = double_quant_note(method, "SGLang")
        return notes + ([double_quant + "."] if double_quant else [])
    return []


def _kv_cache_notes(kv_cache_dtype: str) -> list[str]:
    if kv_cache_dtype != "fp8":
        return []
    return [
        "SGLang has no bare `fp8` KV-cache dtype; fp8_e4m3 matches vLLM's fp8. Without --quantization-param-path "
        "the KV scales default to 1.0, which SGLang warns may cost accuracy.",
    ]


#: The port of SGLang's distributed init on the first node (``--dist-init-addr HOST:PORT``).
DIST_INIT_PORT = 25000


def _parallel_options(settings: LaunchSettings) -> tuple[list[Option], list[str]]:
    """``--tp-size``, and for an expert-parallel replica ``--ep-size``, DP attention, EPLB and the nodes; the switches
    (flags without a value) apart."""
    ep = settings.expert_parallel
    if ep is None:
        return [("--tp-size", settings.tensor_parallel)], []
    options: list[Option] = [("--tp-size", ep.ep), ("--ep-size", ep.ep)]
    switches: list[str] = []
    if ep.attention_dp > 1:
        options.append(("--dp-size", ep.attention_dp))
        switches.append("--enable-dp-attention")
    if ep.redundant_experts:
        options.append(("--ep-num-redundant-experts", ep.redundant_experts))
        switches.append("--enable-eplb")
    if ep.nodes > 1:
        address = f"{HEAD_NODE_ADDRESS}:{DIST_INIT_PORT}"
        options += [("--nnodes", ep.nodes), ("--node-rank", ep.node_rank), ("--dist-init-addr", address)]
    return options, switches


def _expert_parallel_notes(settings: LaunchSettings) -> list[str]:
    ep = settings.expert_parallel
    if ep is None:
        return []
    notes = [
        f"--ep-size {ep.ep} splits the experts over the replica's {ep.ep} GPUs with {ep.attention_dp} attention "
        f"rank(s) of {ep.attention_tp} GPU(s); --max-running-requests and --chunked-prefill-size are the replica's "
        f"(SGLang divides both by --dp-size), so they are {ep.attention_dp} x the batch and budget of one rank. "
        "The MoE all-to-all is SGLang's default (--moe-a2a-backend none); --moe-a2a-backend deepep, with DeepEP "
        "installed, may be faster.",
    ]
    if ep.nodes > 1:
        notes.append(
            f"node {ep.node_rank} of {ep.nodes}: run the same command on every node with its --node-rank; set "
            f"{HEAD_NODE_ADDRESS} to the first node's address (port {DIST_INIT_PORT} reachable); the first node "
            "serves the API."
        )
    return notes
