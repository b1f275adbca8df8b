"""How a serving engine batches, as far as the step-cost model and the scheduler simulation need.

Each engine's module in `recommender.engines` holds its `EngineProfile` (``PROFILE``, sourced there):
its default token budget per step, whether prompt chunks share a step
with the running decodes, and its default cap on running sequences. The calibration fits a
step cost per engine on top of these (``step_fit.py``); an engine without measured runs is
simulated with its own batching and the engine-agnostic step cost (a wider interval).

Why the fp8 KV cache's read width depends on the release:

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from recommender.perf.sim.scheduler_config import SchedulerConfig

__all__ = ["EngineProfile"]


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
        return replace(
            config,
            mixed_prefill=self.mixed_prefill,
            reserve_whole_request=self.reserve_whole_request,
            max_num_batched_tokens=budget,
        )

    def describe(self) -> str:
        """The batching in words, for provenance lines."""
        cap = f" (simulated with at most {self.step_budget_cap})" if self.step_budget_cap is not None else ""
        since = self.kv_read_at_width_since
        reads = f", an fp8 KV cache read at 16-bit cost before {since}" if since else ""
        return (
            f"{self.max_num_batched_tokens} tokens per step{cap}, prefill "
            f"{'mixed with decodes' if self.mixed_prefill else 'alone'}{reads}"
        )


def _major_minor(release: str) -> tuple[int, int] | None:
    """("1.2.0rc6.post1" -> (1, 2)); None for a release that names no number (taken as the current one)."""
    numbers = [int(n) for n in re.findall(r"\d+", release)[:2]]
    return None if not numbers else (numbers[0], numbers[1] if len(numbers) > 1 else 0)
