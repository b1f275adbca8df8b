"""A search candidate whose decode pool runs another GPU (`decode_hardware`): priced by `plan`'s mixed pools, each pool
at its own GPU's price, refused over a node link, launched with both GPUs named.

Real parts: the shipped calibrated step costs, the continuous-batching simulator, the link and price catalogs; one
engine, one degree and one batch cap, so each case simulates a handful of pools.
"""

from __future__ import annotations

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.fleet.layouts.disaggregated_plan import pool_options
from recommender.fleet.layouts.mixed_pools import mixed_row
from recommender.fleet.layouts.search_layouts import layout_verdict
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.quantize import get_scheme

CATALOG = load_catalog()
LLAMA_8B = load_architecture("llama-3.1-8b")[1]
#: 4,000-token prompts, 128-token answers at 10 req/s: long enough for pools to matter, short enough to simulate in
#: seconds (tests/fleet/layouts/test_mixed_pools.py has the case where the pair wins).
LONG_PROMPTS = Traffic(prompt_tokens=4000, output_tokens=128, requests_per_second=10)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=40)
MIXED = Candidate("bf16", "baseline", "h100-sxm", 32, layout="disaggregated", decode_hardware="h200")


def _performance() -> PerformanceEvaluator:
    return PerformanceEvaluator(CATALOG, LLAMA_8B, LONG_PROMPTS, SLA, engines=("vllm",))


@pytest.fixture(scope="module")
def mixed() -> CandidateResult:
    """Prefill on H100 SXM, decode on H200, over InfiniBand, with its launch (a few seconds on 2 cores)."""
    return evaluate_disaggregated(_performance(), MIXED, link="infiniband-ndr", model="meta-llama/Llama-3.1-8B")


def test_each_pool_is_priced_at_its_own_gpus_price(mixed: CandidateResult) -> None:
    assert mixed.status == "evaluated" and mixed.pools is not None and mixed.cost is not None, mixed.broken
    p, q = mixed.pools.prefill.estimate.gpus, mixed.pools.decode.estimate.gpus
    h100, h200 = CATALOG.hourly_price("h100-sxm"), CATALOG.hourly_price("h200")
    assert h100 != h200
    assert mixed.cost.usd_per_month == pytest.approx((p * h100 + q * h200) * HOURS_PER_MONTH, rel=1e-12)
    assert mixed.cost.accelerators == p + q and mixed.cost.replicas == (
        mixed.pools.prefill.estimate.workers + mixed.pools.decode.estimate.workers
    )
    assert mixed.cost.price_per_hour_usd == pytest.approx((p * h100 + q * h200) / (p + q), rel=1e-12)
    assert "prefill GPUs" in mixed.cost.price_source and "decode GPUs" in mixed.cost.price_source
    tokens = LONG_PROMPTS.prompt_tokens + LONG_PROMPTS.output_tokens
    per_request = sum(
        hourly * pool.tensor_parallel / (pool.estimate.requests_per_s * 3600)
        for hourly, pool in ((h100, mixed.pools.prefill), (h200, mixed.pools.decode))
    )
    assert mixed.cost.usd_per_1m_tokens == pytest.approx(per_request / tokens * 1e6, rel=1e-12)


def test_its_pools_are_the_ones_plan_pairs_at_that_scope(mixed: CandidateResult) -> None:
    performance = _performance()
    scope = PlanScope(tensor_parallel=(1,), batch_sizes=(32,), kv_cache_dtypes=("auto",))
    options = [
        pool_options(
            performance,
            CATALOG.get(hw),
            "bf16",
            get_scheme("baseline"),
            link=resolve_link("infiniband-ndr", CATALOG.get(hw)),
            scope=scope,
            decode_always=hw == "h200",
        )
        for hw in ("h100-sxm", "h200")
    ]
    row = mixed_row(*options)
    assert mixed.pools is not None and mixed.cost is not None
    assert (row.prefill, row.decode) == (mixed.pools.prefill, mixed.pools.decode)
    assert row.usd_per_month == pytest.approx(mixed.cost.usd_per_month, rel=1e-12)
    assert mixed.serving is not None and mixed.serving.provenance.detail.startswith(row.provenance.detail[:40])  # type: ignore[union-attr]
    assert "prefill on h100-sxm, decode on h200" in mixed.serving.provenance.detail


def test_the_launch_names_both_gpus_and_the_key_the_decode_gpu(mixed: CandidateResult) -> None:
    assert mixed.key == "bf16/baseline@h100-sxmx1/bs32/disagg/decode-h200"
    assert mixed.pools is not None and mixed.pools.launch is not None
    assert any("decode workers on h200 nodes" in note for note in mixed.pools.launch.notes)
    assert '"kv_role":"kv_consumer"' in mixed.pools.launch.decode


def test_a_mixed_pair_over_nvlink_is_pruned_with_the_reason() -> None:
    refused = evaluate_disaggregated(_performance(), MIXED, link="nvlink")
    assert refused.status == "pruned" and refused.pools is None
    assert refused.broken == [
        "runnable: nvlink cannot join a prefill pool on h100-sxm to a decode pool on h200: two GPU types are never "
        "in one nvlink domain"
    ]


def test_the_decode_gpu_must_run_the_model_too() -> None:
    # An RTX 4090's 24 GB do not hold Llama-3.1-8B's bf16 weights with a request at TP1: the decode pool cannot run.
    c = Candidate("bf16", "baseline", "h100-sxm", 64, layout="disaggregated", decode_hardware="rtx-4090")
    refused = evaluate_disaggregated(_performance(), c, link="infiniband-ndr")
    assert refused.status == "pruned" and refused.broken[0].startswith("memory"), refused.broken


def test_the_layout_verdict_compares_mixed_pools_by_price_naming_both_gpus(mixed: CandidateResult) -> None:
    aggregated = _performance().evaluate(Candidate("bf16", "baseline", "h100-sxm", 32))
    verdict = layout_verdict([aggregated, mixed], mixed, target_rps=10, sla=SLA)
    assert verdict is not None and verdict.disaggregated == mixed.key
    assert "on h100-sxm" in verdict.reason and "on h200" in verdict.reason, verdict.reason
    assert verdict.reason.startswith(("mixed pools save", "aggregated wins")), verdict.reason
