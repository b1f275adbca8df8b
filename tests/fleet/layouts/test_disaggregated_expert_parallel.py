"""Disaggregated pools with expert-parallel workers (`plan --layout disaggregated --expert-parallel`).

Real parts: the shipped calibrated coefficients and MoE fit, the EP memory model, the modeled all-to-all, the
continuous-batching simulator, the engines' own command emitters. Qwen3-30B-A3B (128 experts, top-8, 4 KV heads) in
FP8 on H100 SXM at a traffic whose decode pool needs well over a node of GPUs: a few seconds per plan. DeepSeek-V3
on H200 behind the slow marker.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest
import yaml

from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, plan_disaggregated
from recommender.fleet.layouts.disaggregated_row_launch import with_launch
from recommender.fleet.layouts.layout_compare import plan_layouts
from recommender.fleet.layouts.pool_workers import ExpertParallelPools, ExpertParallelWorker, WorkerContext
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.expert_parallel import ExpertParallelLayout
from recommender.perf.sim.disaggregated import decode_pool
from recommender.quantize import get_scheme

CATALOG = load_catalog()
H100 = CATALOG.get("h100-sxm")
QWEN3_MOE = load_architecture("qwen3-30b-a3b")[1]
FP8 = get_scheme("fp8-dynamic")
TRAFFIC = Traffic(prompt_tokens=2000, output_tokens=500, requests_per_second=150)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=50)
SCOPE = PlanScope(tensor_parallel=(1, 8), batch_sizes=(128,), kv_cache_dtypes=("auto",))
PERFORMANCE = PerformanceEvaluator(CATALOG, QWEN3_MOE, TRAFFIC, SLA, engines=("vllm",), require_price=False)
LINK = resolve_link("infiniband-ndr", H100)


@pytest.fixture(scope="module")
def ep_row() -> DisaggregatedRow:
    """The pools with expert-parallel workers offered (about 6 s)."""
    pools = ExpertParallelPools().on(LINK)
    return plan_disaggregated(PERFORMANCE, H100, "fp8", FP8, link=LINK, scope=SCOPE, expert_parallel=pools)


def test_the_decode_pool_takes_expert_parallel_workers_and_its_command_carries_the_ep_flags(
    ep_row: DisaggregatedRow,
) -> None:
    decode = ep_row.decode
    assert decode is not None and ep_row.prefill is not None
    assert (decode.expert_parallel, decode.attention_dp, decode.tensor_parallel) == (8, 8, 1)
    assert decode.estimate.gpus == decode.estimate.workers * 8
    assert ep_row.tpot_p99_high_ms is not None and ep_row.tpot_p99_high_ms <= SLA.tpot_p99_ms
    assert ep_row.provenance is not None and "decode workers EP8 (DP8 x TP1)" in ep_row.provenance.detail
    assert "all-to-all modeled" in ep_row.provenance.detail

    launched = with_launch(ep_row, model="Qwen/Qwen3-30B-A3B", accel=H100, max_model_len=TRAFFIC.max_model_len)
    assert launched.launch is not None
    argv = shlex.split(launched.launch.decode)
    for flag in ("--enable-expert-parallel", "--data-parallel-size", "--kv-transfer-config"):
        assert flag in argv
    assert argv[argv.index("--data-parallel-size") + 1] == "8" and argv[argv.index("--tensor-parallel-size") + 1] == "1"
    assert argv[argv.index("--max-num-seqs") + 1] == str(decode.batch_size)  # one attention rank's cap
    assert "kv_consumer" in launched.launch.decode and "--enable-expert-parallel" not in launched.launch.prefill
    services = yaml.safe_load(launched.launch.dynamo)["spec"]["services"]
    assert services["VllmDecodeWorker"]["resources"]["limits"]["gpu"] == "8"  # TP 1 x DP 8
    assert services["VllmDecodeWorker"]["replicas"] == decode.estimate.workers
    assert launched.launch.llm_d == "" and any("LeaderWorkerSet" in n for n in launched.launch.notes)


def test_the_pools_launch_carries_the_router_policy_into_the_dynamo_frontend(ep_row: DisaggregatedRow) -> None:
    launched = with_launch(
        ep_row, model="Qwen/Qwen3-30B-A3B", accel=H100, max_model_len=TRAFFIC.max_model_len, routing="prefix-aware"
    )
    assert launched.launch is not None
    frontend = yaml.safe_load(launched.launch.dynamo)["spec"]["services"]["Frontend"]
    assert frontend["envs"] == [{"name": "DYN_ROUTER_MODE", "value": "kv"}]


def test_expert_parallel_decode_needs_fewer_gpus_than_tensor_parallel_decode(ep_row: DisaggregatedRow) -> None:
    # 150 req/s of 2000 + 500 tokens: TP1 decode workers carry ~8.7 req/s each (18 GPUs); an EP8 worker's eight
    # attention ranks each stream one eighth of the experts and carry ~94 req/s per 8 GPUs (16 GPUs).
    tp_row = plan_disaggregated(PERFORMANCE, H100, "fp8", FP8, link=LINK, scope=SCOPE)
    assert tp_row.decode is not None and ep_row.decode is not None and tp_row.prefill is not None
    assert tp_row.decode.expert_parallel == 1
    assert ep_row.decode.estimate.gpus < tp_row.decode.estimate.gpus
    assert ep_row.gpus is not None and tp_row.gpus is not None and ep_row.gpus < tp_row.gpus
    assert ep_row.prefill == tp_row.prefill  # the prefill pool keeps its TP1 workers: EP8 would need 8 GPUs a worker


def _decode_rate(worker: ExpertParallelWorker) -> float:
    ctx = WorkerContext(PERFORMANCE, H100, FP8, "fp8", "vllm", "auto")
    setup = worker.setup(ctx, 128)
    assert setup is not None
    got = decode_pool(setup, PERFORMANCE.load, ttft_budget_ms=400, tpot_limit_ms=50, longest_prompt=2000)
    return got.requests_per_s


def test_expert_skew_slows_an_expert_parallel_decode_worker_and_redundant_experts_win_it_back() -> None:
    even = ExpertParallelWorker(ExpertParallelLayout(8, 8))
    skewed = ExpertParallelWorker(ExpertParallelLayout(8, 8), skew=1.2)
    balanced = ExpertParallelWorker(ExpertParallelLayout(8, 8, redundant_experts=16), skew=1.2)
    rates = [_decode_rate(w) for w in (even, skewed, balanced)]
    assert rates[1] < rates[0] and rates[2] > rates[1]


@pytest.mark.parametrize(
    ("model", "degrees", "redundant", "field"),
    [("llama-3.1-8b", (), 0, "--expert-parallel"), ("qwen3-30b-a3b", (8,), 3, "--tensor-parallel")],
)
def test_a_dense_model_or_an_ep_degree_that_does_not_split_the_experts_is_bad_input_naming_the_flag(
    model: str, degrees: tuple[int, ...], redundant: int, field: str
) -> None:
    with pytest.raises(BadInputError) as info:
        plan_layouts(
            PlanRequest(
                shape=load_architecture(model)[1],
                catalog=CATALOG,
                hardware=("h100-sxm",),
                precisions=("fp8",),
                traffic=TRAFFIC,
                sla=SLA,
                link="infiniband-ndr",
                scope=PlanScope(tensor_parallel=degrees),
            ),
            expert_parallel=ExpertParallelPools(redundant_experts=redundant),
        )
    assert info.value.field == field


def test_an_engine_that_refuses_the_pools_ep_layout_leaves_the_row_without_a_launch_saying_why(
    ep_row: DisaggregatedRow,
) -> None:
    # TensorRT-LLM's EP command leaves redundant expert slots to Wide-EP's load balancer (trtllm.py, cited there).
    assert ep_row.decode is not None
    row = replace(ep_row, engine="trtllm", decode=replace(ep_row.decode, redundant_experts=8))
    launched = with_launch(row, model="Qwen/Qwen3-30B-A3B", accel=H100, max_model_len=TRAFFIC.max_model_len)
    assert launched.launch is None and "redundant expert slots" in launched.note


def test_sglang_pools_get_dp_attention_and_the_disaggregation_mode(ep_row: DisaggregatedRow) -> None:
    row = replace(ep_row, engine="sglang")
    launched = with_launch(row, model="Qwen/Qwen3-30B-A3B", accel=H100, max_model_len=TRAFFIC.max_model_len)
    assert launched.launch is not None
    decode = launched.launch.decode
    for flag in ("--ep-size 8", "--dp-size 8", "--enable-dp-attention", "--disaggregation-mode decode"):
        assert flag in decode, decode


@pytest.mark.slow  # DeepSeek-V3: about 12 s
def test_deepseek_v3_decode_on_eight_attention_ranks_halves_the_pools() -> None:
    h200 = CATALOG.get("h200")
    shape = load_architecture("deepseek-v3")[1]
    traffic = Traffic(prompt_tokens=2000, output_tokens=500, requests_per_second=20)
    performance = PerformanceEvaluator(CATALOG, shape, traffic, SLA, engines=("sglang",), require_price=False)
    scope = PlanScope(tensor_parallel=(8,), batch_sizes=(64,), kv_cache_dtypes=("auto",))
    link = resolve_link("infiniband-ndr", h200)
    tp = plan_disaggregated(performance, h200, "fp8", FP8, link=link, scope=scope)
    ep = plan_disaggregated(
        performance, h200, "fp8", FP8, link=link, scope=scope, expert_parallel=ExpertParallelPools().on(link)
    )
    assert ep.decode is not None and ep.decode.attention_dp == 8 and ep.gpus is not None and tp.gpus is not None
    # MLA's latent is whole on every GPU of a TP8 group: eight attention ranks hold eight times the sequences.
    assert ep.gpus < tp.gpus
    launched = with_launch(ep, model="deepseek-ai/DeepSeek-V3", accel=h200, max_model_len=traffic.max_model_len)
    assert launched.launch is not None and "--enable-dp-attention" in launched.launch.decode
