"""Aggregated against disaggregated: disaggregation wins where prefill interrupting the decode batch breaks the TPOT
limit, and loses at short prompts where the second pool and the transfer cost more than they save.

Real parts: the shipped calibrated step costs, the continuous-batching simulator, the link catalog; the scopes
are narrowed (one degree, one batch cap) so each case simulates a handful of configurations.
"""

from __future__ import annotations

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.fleet.layouts.layout_compare import plan_layouts
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog

CATALOG = load_catalog()
LLAMA_8B = load_architecture("llama-3.1-8b")[1]


def test_disaggregation_wins_where_prefill_interruptions_break_the_tpot_limit() -> None:
    # 8,000-token prompts on SGLang (a prefill batch pauses the running decodes): an aggregated replica holds the
    # 15 ms TPOT only at a fraction of its throughput, a decode pool never prefills.
    traffic = Traffic(prompt_tokens=8000, output_tokens=256, requests_per_second=20)
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=15)
    scope = PlanScope(tensor_parallel=(2,), batch_sizes=(128,), kv_cache_dtypes=("auto",))
    [got] = plan_layouts(
        PlanRequest(
            shape=LLAMA_8B,
            catalog=CATALOG,
            hardware=("h100-sxm",),
            precisions=("fp8",),
            traffic=traffic,
            sla=sla,
            link="nvlink",
            scope=scope,
            engines=("sglang",),
        )
    )
    d, a = got.disaggregated, got.aggregated
    assert got.winner == "disaggregated", got.reason
    assert d.gpus is not None and a.replicas is not None and d.gpus < a.replicas * 2
    assert got.reason.startswith("disaggregated saves") and "TPOT limit" in got.reason
    assert d.tpot_p99_high_ms is not None and d.tpot_p99_high_ms <= 15
    assert d.ttft_p99_high_ms is not None and d.ttft_p99_high_ms <= 2000
    assert d.transfer_ms is not None and d.transfer_ms > 0  # the KV moves, and its time is on the TTFT
    assert d.usd_per_month is not None and a.usd_per_month is not None and d.usd_per_month < a.usd_per_month


def test_disaggregation_loses_at_short_prompts_where_the_transfer_and_ttft_split_cost_more_than_they_save() -> None:
    # 128-token prompts barely interrupt vLLM's mixed batches; the prefill leg gets what the transfer and the
    # decode side's share leave of a 150 ms TTFT, so the pools need more GPUs of work than the replicas.
    traffic = Traffic(prompt_tokens=128, output_tokens=256, requests_per_second=200)
    sla = LatencySLA(ttft_p99_ms=150, tpot_p99_ms=30)
    scope = PlanScope(tensor_parallel=(1,), batch_sizes=(256,), kv_cache_dtypes=("auto",))
    [got] = plan_layouts(
        PlanRequest(
            shape=LLAMA_8B,
            catalog=CATALOG,
            hardware=("h100-sxm",),
            precisions=("fp8",),
            traffic=traffic,
            sla=sla,
            link="infiniband-ndr",
            scope=scope,
            engines=("vllm",),
        )
    )
    assert got.winner == "aggregated", got.reason
    a, d = got.aggregated, got.disaggregated
    assert a.replicas is not None and d.gpus is not None and d.gpus > a.replicas
    assert "cost more than uninterrupted decode saves" in got.reason


def test_disaggregation_loses_at_low_traffic_where_each_pool_rounds_up_to_a_whole_worker() -> None:
    traffic = Traffic(prompt_tokens=128, output_tokens=256, requests_per_second=5)
    sla = LatencySLA(ttft_p99_ms=300, tpot_p99_ms=30)
    scope = PlanScope(tensor_parallel=(1,), batch_sizes=(256,), kv_cache_dtypes=("auto",))
    [got] = plan_layouts(
        PlanRequest(
            shape=LLAMA_8B,
            catalog=CATALOG,
            hardware=("h100-sxm",),
            precisions=("fp8",),
            traffic=traffic,
            sla=sla,
            link="infiniband-ndr",
            scope=scope,
            engines=("vllm",),
        )
    )
    assert got.winner == "aggregated", got.reason
    assert got.aggregated.replicas == 1 and got.disaggregated.gpus == 2
    assert got.reason.startswith("aggregated wins: 1 GPUs") and "prefill" in got.reason


@pytest.mark.parametrize(("link", "hardware"), [("carrier-pigeon", "h100-sxm"), ("nvlink", "h100-pcie")])
def test_an_unknown_link_or_nvlink_on_a_pcie_card_is_refused_naming_the_flag(link: str, hardware: str) -> None:
    traffic = Traffic(prompt_tokens=128, output_tokens=16, requests_per_second=1)
    with pytest.raises(BadInputError) as info:
        plan_layouts(
            PlanRequest(
                shape=LLAMA_8B,
                catalog=CATALOG,
                hardware=(hardware,),
                precisions=("fp8",),
                traffic=traffic,
                sla=LatencySLA(ttft_p99_ms=300, tpot_p99_ms=30),
                link=link,
            )
        )
    assert info.value.field == "--link" and "\n" not in str(info.value)


def test_sglang_pools_of_a_sliding_window_model_choose_one_degree_together() -> None:
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.fleet.layouts.disaggregated_plan import _degree_groups

    traffic = Traffic(prompt_tokens=128, output_tokens=16, requests_per_second=1)
    sla = LatencySLA(ttft_p99_ms=300, tpot_p99_ms=30)
    gpt_oss = PerformanceEvaluator(CATALOG, load_architecture("gpt-oss-20b")[1], traffic, sla, require_price=False)
    assert _degree_groups("sglang", gpt_oss, [1, 2, 4]) == [[1], [2], [4]]
    assert _degree_groups("vllm", gpt_oss, [1, 2, 4]) == [[1, 2, 4]]
    llama = PerformanceEvaluator(CATALOG, LLAMA_8B, traffic, sla, require_price=False)
    assert _degree_groups("sglang", llama, [1, 2]) == [[1, 2]]
