"""How many sequences each engine runs at once, and where it stores the KV cache in FP8: the batch caps searched.

At high load an engine holds hundreds to thousands of requests in flight per replica; a search that stops at a
cap of 256 predicts a queue the engine never builds. So `plan`, the search and the GPU mix try caps up to each
engine's own maximum, and the KV cache (16-bit or FP8) prunes the caps it cannot hold
(``evaluation/batch_caps.py``).

Each engine's maximum on running sequences, read in its source:

* vLLM: ``max_num_seqs`` must not exceed ``max_num_batched_tokens`` (vllm/config/scheduler.py, the
  ``SchedulerConfig`` check ``scheduler_config.py`` repeats), so its ceiling is the launched token budget;
  ``vllm serve`` defaults to 1024 on a GPU with >= 70 GiB that is not an A100 and 256 elsewhere
  (vllm/engine/arg_utils.py @ 99d7eb5, ``default_max_num_seqs`` in ``_set_default_args``).
* SGLang: ``max_running_requests`` defaults to ``max_total_num_tokens // 2`` bounded by the request pool,
  ``req_to_token_pool.size`` (python/sglang/srt/managers/scheduler.py), whose size without the flag is
  ``min(max(int(max_total_num_tokens / context_len * 512), 2048), 4096)``
  (python/sglang/srt/model_executor/model_runner.py, ``init_memory_pool``; 5120 at 01cc04e, 4096 in the
  releases since): at most 4096.
* TensorRT-LLM: ``max_batch_size`` 2048 and ``max_num_tokens`` 8192 by default (tensorrt_llm/llmapi/llm_args.py,
  cited in ``trtllm.py``); a decode takes one token of ``max_num_tokens``, so the batch is at most 2048.
* TGI: its batch is bounded by its token budget (``max_batch_total_tokens``); no separate cap is modelled.

FP8 KV cache (``--kv-cache-dtype fp8`` and its equivalents), where each engine stores and reads it natively:

* vLLM: E4M3 on CUDA and ROCm (vllm/config/cache.py @ c1d8642); its docs name AMD MI300 and NVIDIA Hopper or
  later as the parts with native FP8 conversion (docs.vllm.ai quantization/fp8_e4m3_kvcache), and
  FlashAttention 3 (Hopper) computes attention in FP8 with it (features/quantization/quantized_kvcache.md).
* SGLang: ``fp8_e4m3`` (server_args.py @ 001067f) through the attention backends that fuse the dequantization
  (docs.sglang.io advanced_features/quantized_kv_cache: "Always verify that your chosen attention backend
  supports quantized KV cache").
* TensorRT-LLM: ``KvCacheConfig(dtype='fp8')`` (nvidia.github.io/TensorRT-LLM/1.0.0/features/quantization.html),
  FP8 supported on Ada (SM89) and Hopper (SM90), not Ampere (reference/support-matrix.html, 0.18.2).

So the FP8 KV cache is searched where the GPU converts FP8 natively: NVIDIA compute capability >= 8.9, and AMD
Instinct (vLLM and SGLang on ROCm). On an Ampere GPU vLLM can store FP8 and dequantize it in software, slower
than the 16-bit cache it saves memory for; that is not searched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from recommender.device import DeviceInfo

__all__ = ["BATCH_LADDER_FLOOR", "batch_ladder", "fp8_kv_refusal", "max_running"]

#: Most sequences each engine runs at once whatever its token budget (None: the budget bounds it, as in vLLM).
_MAX_RUNNING: dict[str, int | None] = {"vllm": None, "sglang": 4096, "trtllm": 2048, "tgi": None}
#: The smallest cap of the ladder: below it a replica of any catalog GPU idles its bandwidth.
BATCH_LADDER_FLOOR = 64
#: FP8 KV storage with native conversion (see the module docstring).
FP8_KV_MIN_CAPABILITY = (8, 9)
_FP8_KV_ON_ROCM = frozenset({"vllm", "sglang"})


def max_running(engine: str, budget: int) -> int:
    """The most sequences `engine` runs at once when launched with a token budget of `budget` per step."""
    cap = _MAX_RUNNING.get(engine)
    return budget if cap is None else min(cap, budget)


def batch_ladder(engines: Iterable[str], budget: int) -> list[int]:
    """Caps to try: powers of two from 64 up to the largest engine maximum among `engines` (the KV cache prunes
    those it cannot hold)."""
    top = max((max_running(e, budget) for e in engines), default=BATCH_LADDER_FLOOR)
    caps, cap = [], BATCH_LADDER_FLOOR
    while cap <= top:
        caps.append(cap)
        cap *= 2
    return caps or [top]


def fp8_kv_refusal(engine: str, device: DeviceInfo) -> str | None:
    """Why `engine` does not keep an FP8 KV cache natively on `device`, or None when it does."""
    if device.kind == "rocm":
        return None if engine in _FP8_KV_ON_ROCM else f"{engine} has no FP8 KV cache on ROCm"
    if device.kind != "cuda" or device.compute_capability is None:
        return f"no FP8 KV cache on {device.kind}"
    if device.compute_capability < FP8_KV_MIN_CAPABILITY:
        return (
            f"FP8 KV cache needs native FP8 conversion (compute capability >= 8.9), not "
            f"{device.compute_capability[0]}.{device.compute_capability[1]}"
        )
    return None
