"""How each serving engine batches, as far as the step-cost model and the scheduler simulation need.

One entry per engine: its default token budget per step, whether prompt chunks share a step
with the running decodes, and its default cap on running sequences. The calibration fits a
step cost per engine on top of these (``step_fit.py``); an engine without measured runs is
simulated with its own batching and the engine-agnostic step cost (a wider interval).

Sources (defaults of the engine releases in ``shared/calibration``):

* vLLM 0.12 (V1 engine): chunked prefill always on, prefill chunks and decodes in one step;
  `vllm serve` defaults `max_num_batched_tokens` to 8192 on GPUs with 70 GiB or more
  (vllm/engine/arg_utils.py, `_set_default_args`, `default_max_num_batched_tokens[OPENAI_API_SERVER]`).
* SGLang 0.5: `--chunked-prefill-size` 8192 on GPUs with 80 GB class memory
  (sglang/srt/server_args.py, `_handle_gpu_memory_settings`); the default scheduler runs a
  prefill batch on its own, ahead of the running decode batch (`enable_mixed_chunk` off,
  sglang/srt/managers/scheduler.py `get_next_batch_to_run`).
* TensorRT-LLM 1.0 (`trtllm-serve`, PyTorch backend): in-flight batching puts context and
  generation requests in one iteration within `max_num_tokens` (8192 by default,
  tensorrt_llm/llmapi/llm_args.py); modelled here as mixed chunks within that budget.
* TGI: no measured runs here; vLLM-like mixed batching (`--max-batch-prefill-tokens` 4096,
  text-generation-launcher defaults) with the engine-agnostic step cost.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENGINE_PROFILES", "EngineProfile", "engine_profile"]


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """An engine's batching defaults."""

    name: str
    max_num_batched_tokens: int
    mixed_prefill: bool
    max_num_seqs: int


ENGINE_PROFILES: dict[str, EngineProfile] = {
    "vllm": EngineProfile("vllm", max_num_batched_tokens=8192, mixed_prefill=True, max_num_seqs=1024),
    "sglang": EngineProfile("sglang", max_num_batched_tokens=8192, mixed_prefill=False, max_num_seqs=1024),
    "trtllm": EngineProfile("trtllm", max_num_batched_tokens=8192, mixed_prefill=True, max_num_seqs=2048),
    "tgi": EngineProfile("tgi", max_num_batched_tokens=4096, mixed_prefill=True, max_num_seqs=1024),
}


def engine_profile(engine: str) -> EngineProfile:
    try:
        return ENGINE_PROFILES[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINE_PROFILES)})") from None
