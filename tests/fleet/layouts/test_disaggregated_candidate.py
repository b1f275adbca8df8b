"""A search candidate laid out as disaggregated pools is priced by `plan`'s planner: the same pools, GPUs and reason
as `plan --layout aggregated --layout disaggregated` for that configuration
(tests/fleet/layouts/test_layout_compare.py)."""

from __future__ import annotations

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.fleet.layouts.search_layouts import layout_verdict
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.pricing import HOURS_PER_MONTH

LLAMA_8B = load_architecture("llama-3.1-8b")[1]


def test_long_prompts_on_sglang_price_ten_pool_gpus_against_eighteen_aggregated_as_plan_does() -> None:
    traffic = Traffic(prompt_tokens=8000, output_tokens=256, requests_per_second=20)
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=15)
    catalog = load_catalog()
    performance = PerformanceEvaluator(catalog, LLAMA_8B, traffic, sla, engines=("sglang",))
    aggregated = Candidate("fp8", "fp8-dynamic", "h100-sxm", 128, 2)
    disaggregated = Candidate("fp8", "fp8-dynamic", "h100-sxm", 128, 2, layout="disaggregated")

    dis = evaluate_disaggregated(performance, disaggregated, link="nvlink", model="meta-llama/Llama-3.1-8B")
    assert dis.status == "evaluated" and not dis.broken and dis.pools is not None and dis.cost is not None
    pools = dis.pools
    assert (pools.prefill.estimate.workers, pools.decode.estimate.workers, pools.gpus) == (3, 2, 10)
    assert dis.cost.accelerators == 10 and dis.cost.replicas == 5
    assert dis.cost.usd_per_month == catalog.get("h100-sxm").price_per_hour_usd * 10 * HOURS_PER_MONTH
    assert dis.serving is not None and dis.serving.tpot_p99_high_ms is not None and dis.serving.tpot_p99_high_ms <= 15
    assert pools.launch is not None and "--disaggregation-mode decode" in pools.launch.decode
    assert "Llama-3.1-8B-fp8-dynamic" in pools.launch.prefill  # the checkpoint `recommender quantize` writes

    agg = performance.evaluate(aggregated)
    assert agg.cost is not None and agg.cost.accelerators == 18
    verdict = layout_verdict([agg, dis], dis, target_rps=20, sla=sla)
    assert verdict is not None and verdict.winner == "disaggregated"
    assert verdict.reason.startswith("disaggregated saves 44%: decode batches of 128"), verdict.reason
    assert (verdict.aggregated_gpus, verdict.disaggregated_gpus) == (18, 10)


def test_a_candidate_on_the_local_device_or_with_speculation_is_pruned_with_the_reason() -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
    sla = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50)
    performance = PerformanceEvaluator(load_catalog(), LLAMA_8B, traffic, sla, engines=("vllm",))
    speculative = Candidate("bf16", "baseline", "h100-sxm", 64, speculative="ngram", layout="disaggregated")
    refused = evaluate_disaggregated(performance, speculative, link="nvlink")
    assert refused.status == "pruned" and refused.pools is None
    assert refused.broken == ["runnable: speculative decoding is not modelled in disaggregated pools"]
    local = evaluate_disaggregated(
        performance, Candidate("bf16", "baseline", "local", 64, layout="disaggregated"), link="nvlink"
    )
    assert local.status == "pruned" and local.broken[0].startswith(
        "runnable: disaggregated pools are planned on catalog"
    )
