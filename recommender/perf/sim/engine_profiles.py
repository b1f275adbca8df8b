"""How each serving engine batches, as far as the step-cost model and the scheduler simulation need.

One entry per engine: its default token budget per step, whether prompt chunks share a step
with the running decodes, and its default cap on running sequences. The calibration fits a
step cost per engine on top of these (``step_fit.py``); an engine without measured runs is
simulated with its own batching and the engine-agnostic step cost (a wider interval).

Sources (defaults of the engine releases in ``shared/calibration``, read in the released sources):

* vLLM 0.12 (V1 engine): chunked prefill on for decoder LLMs; the scheduler has "no decoding phase
  nor prefill phase": running requests, then waiting ones, share one token budget per step
  (vllm/v1/core/sched/scheduler.py). `vllm serve` on a GPU with >= 70 GiB that is not an A100
  defaults to max_num_batched_tokens 8192 and max_num_seqs 1024 (vllm/engine/arg_utils.py,
  `get_batch_defaults` in 0.12, `_set_default_args` in 0.11: `OPENAI_API_SERVER: 8192`).
* SGLang 0.5: `chunked_prefill_size` 8192 on 60-90 GB and 90-160 GB GPUs (H100, H200), 16384
  above (sglang/srt/server_args.py `_handle_gpu_memory_settings`); `enable_mixed_chunk` False,
  so a prefill batch runs without the decode batch (sglang/srt/managers/scheduler.py mixes
  only `if self.is_mixed_chunk`); `max_running_requests` is derived from the KV pool.
* TensorRT-LLM 1.x (`trtllm-serve`, PyTorch backend): `max_num_tokens` 8192, `max_batch_size`
  2048, `enable_chunked_prefill` False (tensorrt_llm/llmapi/llm_args.py); context and generation
  requests share an iteration within max_num_tokens — modelled as mixed chunks in that budget.
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
* How decode attention reads an fp8 KV cache (``reads_kv_at_cache_width``). vLLM 0.12 FP8 at TP2, C=48,
  4000 + 1000 tokens measured TPOT 11.6 ms, below the 13.3 ms a 16-bit read of its cache takes at full
  bandwidth, so its kernels read the cache's own bytes; FlashInfer and FlashAttention-3, which SGLang and
  TGI use, read fp8 pages likewise. So does TensorRT-LLM 1.2: its FP8 run at TP1, C=32, 4000 + 1000
  measured TPOT 22.4 ms, where a 16-bit read of the cache and the weights alone take 21.0 ms at full
  bandwidth, leaving 1.4 ms for 64 layers' launches (the fit puts 4.5 ms there). TensorRT-LLM 1.0rc3's 180
  FP8 runs fit far better with the cache timed as 16-bit (cross-validated TPOT error 10 % against 17 %
  timed per byte), though an fp8 cache is what lets their TP1 runs hold 64 requests
  (``serving_runs.MeasuredRun.kv_cache_dtype``): releases before 1.2 are replayed so. The search, ``plan``
  and ``estimate`` predict the current releases.
* TGI: no measured runs here. `--max-batch-prefill-tokens` defaults to a compute-optimal
  figure per GPU (launcher/src/main.rs), falling back to 4096: modelled with 4096, mixed,
  and the engine-agnostic step cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from recommender.perf.sim.scheduler_config import SchedulerConfig

__all__ = ["ENGINE_PROFILES", "EngineProfile", "engine_profile"]


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """An engine's batching defaults."""

    name: str
    max_num_batched_tokens: int
    mixed_prefill: bool
    max_num_seqs: int
    reserve_whole_request: bool = False
    #: Most tokens the simulator lets one step take, whatever budget the engine is launched with (None: the
    #: launched budget); see the module docstring for vLLM's.
    step_budget_cap: int | None = None
    #: Releases before this one ("major.minor") read an fp8 KV cache at what a 16-bit one costs; this one and
    #: later (and every release, when None) read its own bytes. See the module docstring.
    kv_read_at_width_since: str | None = None

    def reads_kv_at_cache_width(self, release: str | None = None) -> bool:
        """Whether decode attention in `release` (None, or a name without a number: the current one) reads an fp8
        KV cache at its width."""
        version = _major_minor(release or "")
        if self.kv_read_at_width_since is None or version is None:
            return True
        return version >= (_major_minor(self.kv_read_at_width_since) or (0, 0))

    def batching(self, config: SchedulerConfig) -> SchedulerConfig:
        """`config` (token budget, seats, KV cache) scheduled the way this engine schedules: the one place an
        engine's batching reaches the simulator, for the calibration's replays and the search alike."""
        budget = config.max_num_batched_tokens
        if self.step_budget_cap is not None:
            budget = max(min(budget, self.step_budget_cap), config.max_num_seqs)
        return replace(config, mixed_prefill=self.mixed_prefill, reserve_whole_request=self.reserve_whole_request,
                       max_num_batched_tokens=budget)  # fmt: skip

    def describe(self) -> str:
        """The batching in words, for provenance lines."""
        cap = f" (simulated with at most {self.step_budget_cap})" if self.step_budget_cap is not None else ""
        since = self.kv_read_at_width_since
        reads = f", an fp8 KV cache read at 16-bit cost before {since}" if since else ""
        return (f"{self.max_num_batched_tokens} tokens per step{cap}, prefill "
                f"{'mixed with decodes' if self.mixed_prefill else 'alone'}{reads}")  # fmt: skip


ENGINE_PROFILES: dict[str, EngineProfile] = {
    "vllm": EngineProfile("vllm", max_num_batched_tokens=8192, mixed_prefill=True, max_num_seqs=1024,
                          step_budget_cap=4096),
    "sglang": EngineProfile("sglang", max_num_batched_tokens=8192, mixed_prefill=False, max_num_seqs=1024,
                            reserve_whole_request=True),
    "trtllm": EngineProfile("trtllm", max_num_batched_tokens=8192, mixed_prefill=True, max_num_seqs=2048,
                            reserve_whole_request=True, kv_read_at_width_since="1.2"),
    "tgi": EngineProfile("tgi", max_num_batched_tokens=4096, mixed_prefill=True, max_num_seqs=1024),
}


def _major_minor(release: str) -> tuple[int, int] | None:
    """("1.2.0rc6.post1" -> (1, 2)); None for a release that names no number (taken as the current one)."""
    numbers = [int(n) for n in re.findall(r"\d+", release)[:2]]
    return None if not numbers else (numbers[0], numbers[1] if len(numbers) > 1 else 0)


def engine_profile(engine: str) -> EngineProfile:
    try:
        return ENGINE_PROFILES[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINE_PROFILES)})") from None
