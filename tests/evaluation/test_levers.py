"""The levers on a winner: prefix caching (shared prefix, conversations) with and without, like for like."""

from __future__ import annotations

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.evaluation.levers import lever_effects
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from tests.conftest import build_spec

_, LLAMA3_8B = load_architecture("llama-3.1-8b")
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=80)
H100 = Candidate("bf16", "baseline", "h100-sxm", 64)


def test_conversations_cost_less_with_their_history_cached_and_the_lever_says_so() -> None:
    """Under a TTFT limit that prefill binds (on the H100's measured kernels this traffic meets a 2 s TTFT with or
    without the cache, both at the capacity search's ceiling; 150 ms it meets only with the history cached)."""
    traffic = Traffic(
        prompt_tokens=1500,
        output_tokens=150,
        requests_per_second=60,
        conversation={"turns": 4, "think_time_s": 30, "message_tokens": 200},
    )
    assert (traffic.mean_prompt_tokens, traffic.longest_prompt_tokens) == (2025, 2550)
    sla = LatencySLA(ttft_p99_ms=150, tpot_p99_ms=80)
    # One engine: the lever is under test, not the engines' race (both engines: twice the simulations, 30 s).
    cached = PerformanceEvaluator(load_catalog(), LLAMA3_8B, traffic, sla, engines=("vllm",))
    recomputed = PerformanceEvaluator(load_catalog(), LLAMA3_8B, traffic, sla, engines=("vllm",), cache_prefixes=False)
    winner = cached.evaluate(H100)
    cold = recomputed.evaluate(H100)
    assert winner.cost is not None and cold.cost is not None and winner.serving is not None
    assert winner.cost.usd_per_month < cold.cost.usd_per_month
    assert cold.serving is not None and cold.serving.prefix_hit_rate == 0.0
    assert 0.5 < (winner.serving.prefix_hit_rate or 0.0) < 1.0
    (lever,) = lever_effects(cached, build_spec({"space.speculative": ["none"]}), winner)
    assert lever.lever == "prefix caching" and "4-turn conversations, 30 s apart" in lever.measured
    assert lever.with_usd_per_month == winner.cost.usd_per_month
    assert lever.without_usd_per_month == cold.cost.usd_per_month
    assert lever.verdict.startswith("pays:")


def test_no_shared_prompt_no_prefix_lever() -> None:
    traffic = Traffic(prompt_tokens=1500, output_tokens=150, requests_per_second=20)
    evaluator = PerformanceEvaluator(load_catalog(), LLAMA3_8B, traffic, SLA)
    assert [
        e.lever for e in lever_effects(evaluator, build_spec({"space.speculative": ["none"]}), evaluator.evaluate(H100))
    ] == []
