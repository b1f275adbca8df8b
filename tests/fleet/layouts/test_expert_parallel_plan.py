"""Expert parallelism in `plan`: DeepSeek-V3 in FP8 on a node of 8 H200s, attention data parallelism against
tensor parallelism, skewed expert load and what EPLB's redundant experts buy back (at a decode-heavy chat traffic,
1,000 + 1,000 tokens, P99 TTFT 3 s / TPOT 80 ms: with a MoE step's upper bound at its left-out models' error, x1.69
per decode step at 90 %, 2,000 + 500 tokens at TPOT 50 ms leave no attention-DP rank within the limit).

Real parts: the shipped calibrated coefficients, the memory model, the continuous-batching simulator; the scope is
one degree and one batch cap so each case simulates a handful of configurations.
"""

from __future__ import annotations

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.expert_parallel_plan import plan_expert_parallel
from recommender.fleet.layouts.parallelism import plan_parallelism
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.quantize import get_scheme

CATALOG = load_catalog()
H200 = CATALOG.get("h200")
DEEPSEEK_V3 = load_architecture("deepseek-v3")[1]
TRAFFIC = Traffic(prompt_tokens=2000, output_tokens=500, requests_per_second=20)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=50)
SCOPE = PlanScope(tensor_parallel=(8,), batch_sizes=(64,), kv_cache_dtypes=("auto",))
PERFORMANCE = PerformanceEvaluator(CATALOG, DEEPSEEK_V3, TRAFFIC, SLA, engines=("sglang",), require_price=False)
FP8 = get_scheme("fp8-dynamic")
DECODE_HEAVY = Traffic(prompt_tokens=1000, output_tokens=1000, requests_per_second=20)
LOOSER = LatencySLA(ttft_p99_ms=3000, tpot_p99_ms=80)
EP_PERFORMANCE = PerformanceEvaluator(
    CATALOG, DEEPSEEK_V3, DECODE_HEAVY, LOOSER, engines=("sglang",), require_price=False
)


@pytest.mark.slow  # about 30 s each: DeepSeek-V3 planned at every EP degree
def test_attention_data_parallelism_with_expert_parallelism_needs_fewer_gpus_than_tensor_parallelism() -> None:
    tp = plan_one(
        DEEPSEEK_V3, H200, "fp8", traffic=DECODE_HEAVY, sla=LOOSER, scope=SCOPE, catalog=CATALOG, engines=("sglang",)
    )
    ep = plan_expert_parallel(EP_PERFORMANCE, H200, FP8, scope=SCOPE)
    assert tp.replicas is not None and ep.gpus is not None and ep.replicas is not None
    # MLA's latent is whole on every GPU of an attention rank: eight ranks of one GPU hold 8x the sequences.
    assert ep.attention_dp == 8 and ep.gpus < tp.replicas * 8
    assert ep.tpot_p99_high_ms is not None and ep.tpot_p99_high_ms <= LOOSER.tpot_p99_ms
    assert ep.usd_per_month is not None and ep.provenance is not None and "all-to-all" in ep.provenance.detail


@pytest.mark.slow  # about 30 s each: DeepSeek-V3 planned at every EP degree
def test_skewed_expert_load_costs_gpus_and_eplb_redundant_experts_win_them_back() -> None:
    even = plan_expert_parallel(EP_PERFORMANCE, H200, FP8, scope=SCOPE)
    skewed = plan_expert_parallel(EP_PERFORMANCE, H200, FP8, skew=1.0, scope=SCOPE)
    balanced = plan_expert_parallel(EP_PERFORMANCE, H200, FP8, skew=1.0, redundant_experts=32, scope=SCOPE)
    assert skewed.imbalance is not None and skewed.imbalance > 2
    assert balanced.imbalance == pytest.approx(1.0, abs=0.01)
    assert even.gpus is not None and skewed.gpus is not None and balanced.gpus is not None
    assert skewed.gpus > even.gpus and balanced.gpus < skewed.gpus


def test_expert_parallelism_for_a_dense_model_is_refused_naming_the_flag() -> None:
    dense = load_architecture("llama-3.1-8b")[1]
    performance = PerformanceEvaluator(CATALOG, dense, TRAFFIC, SLA, require_price=False)
    with pytest.raises(BadInputError) as info:
        plan_expert_parallel(performance, H200, FP8)
    assert info.value.field == "--expert-parallel"


def test_a_replica_too_large_for_one_node_spans_two_over_the_network_link() -> None:
    # 671B parameters in FP8 do not fit eight 80 GB H100s; EP 16 over two nodes does, its all-to-all on InfiniBand.
    h100 = CATALOG.get("h100-sxm")
    network = resolve_link("infiniband-ndr", h100)
    scope = PlanScope(tensor_parallel=(16,), batch_sizes=(64,), kv_cache_dtypes=("auto",))
    row = plan_expert_parallel(PERFORMANCE, h100, FP8, scope=scope, network=network)
    assert row.ep == 16 and row.gpus is not None and row.provenance is not None
    assert "over nvlink and infiniband-ndr" in row.provenance.detail
    one_node = plan_expert_parallel(
        PERFORMANCE, h100, FP8, scope=PlanScope(batch_sizes=(64,), kv_cache_dtypes=("auto",))
    )
    assert one_node.gpus is None and "holds a request" in one_node.note


def test_a_link_within_a_node_between_the_nodes_of_a_replica_is_refused_naming_the_flag() -> None:
    with pytest.raises(BadInputError) as info:
        plan_parallelism(
            PlanRequest(
                shape=DEEPSEEK_V3,
                catalog=CATALOG,
                hardware=("h200",),
                precisions=("fp8",),
                traffic=TRAFFIC,
                sla=SLA,
                link="nvlink",
            )
        )
    assert info.value.field == "--link"


def test_plan_gives_the_expert_parallel_row_its_engines_expert_parallel_command() -> None:
    light = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)  # a few seconds of simulation
    [found] = plan_parallelism(
        PlanRequest(
            shape=DEEPSEEK_V3,
            catalog=CATALOG,
            hardware=("h200",),
            precisions=("fp8",),
            traffic=light,
            sla=SLA,
            scope=SCOPE,
            engines=("vllm",),
            model="deepseek-ai/DeepSeek-V3",
        )
    )
    ep = found.expert_parallel
    assert ep.engine == "vllm" and ep.ep == 8 and ep.attention_dp is not None
    assert ep.launch.startswith("vllm serve DeepSeek-V3-fp8-dynamic ")  # the checkpoint `quantize --out` writes
    assert "--enable-expert-parallel" in ep.launch
    assert (
        f"--tensor-parallel-size {8 // ep.attention_dp}" in ep.launch
        and f"--max-num-seqs {SCOPE.batch_sizes[0]}" in ep.launch
    )
    assert found.tensor_parallel.launch == ""  # plan_parallelism leaves the TP row's launch to `plan`
