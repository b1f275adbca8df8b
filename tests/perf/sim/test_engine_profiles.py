"""Each engine's batching as simulated: vLLM's tokens per step capped whatever it is launched with, the others
as launched."""

from __future__ import annotations

from recommender.engines import PROFILES
from recommender.perf.sim.scheduler_config import SchedulerConfig


def test_vllm_is_simulated_with_at_most_4096_tokens_per_step_whatever_it_is_launched_with() -> None:
    launched = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=256, max_num_batched_tokens=8192)
    assert PROFILES["vllm"].batching(launched).max_num_batched_tokens == 4096
    small = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=256, max_num_batched_tokens=2048)
    assert PROFILES["vllm"].batching(small).max_num_batched_tokens == 2048
    seats = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=6000, max_num_batched_tokens=8192)
    assert PROFILES["vllm"].batching(seats).max_num_batched_tokens == 6000  # never below the seats
    # The other engines keep what they are launched with, also after vLLM's batching was applied once.
    assert PROFILES["sglang"].batching(launched).max_num_batched_tokens == 8192
    assert "simulated with at most 4096" in PROFILES["vllm"].describe()
