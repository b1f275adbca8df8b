"""A search candidate served with expert parallelism: priced by the planner of `plan --expert-parallel`.

The candidate names a mixture-of-experts model's scheme, GPU, batch cap per attention rank, KV cache dtype and an
expert-parallel degree N: one replica of N GPUs with the routed experts split over them and 1 or N attention
ranks, whichever needs fewer GPUs (``plan_expert_parallel`` at a scope narrowed to that degree, cap and KV dtype;
beyond one node the all-to-all crosses the spec's link when it is a network link). Its result reads like an
aggregated candidate's: the rank's P99s with their upper ends (P50/P95 not simulated, NaN), capacity per replica,
replicas and price. Its quality is its scheme's, measured once whatever the layout. The spec's expert skew and
redundant experts (``ExpertRouting``) set every EP candidate's busiest GPU as `plan --expert-skew/--redundant-experts`
set a plan row's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.config.candidate import AGGREGATED, Candidate
from recommender.config.spec import LOCAL_DEVICE
from recommender.engines.eligibility import eligibility
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.refusal import Refused
from recommender.evaluation.speed import latency_checks
from recommender.fleet.launch import expert_parallel_launch
from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow, plan_expert_parallel
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.links import resolve_link
from recommender.perf.pricing import estimate_cost
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.serving import ServingEstimate
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.engines import EngineLaunch
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.link import Link

__all__ = ["ExpertRouting", "evaluate_expert_parallel", "expert_parallel_winner_launch"]


@dataclass(frozen=True, slots=True)
class ExpertRouting:
    """How the router loads the experts (``space.expert_skew``) and the EPLB slots that even it out
    (``space.redundant_experts``): what an expert-parallel replica's busiest GPU carries (``expert_imbalance``)."""

    skew: float = 0.0
    redundant_experts: int = 0


def evaluate_expert_parallel(
    performance: PerformanceEvaluator, c: Candidate, *, link: str, experts: ExpertRouting | None = None
) -> CandidateResult:
    """`c` (expert_parallel > 1) judged on speed and cost, its quality still unknown; pruned with the reason where
    it cannot run or no replica of that degree meets the SLA."""
    try:
        accel = _checked(performance, c)
        row = _planned(performance, c, accel, link, experts or ExpertRouting())
        if row.gpus is None or row.requests_per_s_per_replica is None:
            raise Refused("tpot", f"{row.note or 'no replica meets the SLA'} (EP{c.expert_parallel})")
    except Refused as refused:
        return refused.result(c)
    return _result(performance, c, accel, row)


def _planned(
    performance: PerformanceEvaluator, c: Candidate, accel: Accelerator, link: str, experts: ExpertRouting
) -> ExpertParallelRow:
    """`plan --expert-parallel`'s row at the candidate's degree, batch cap and KV dtype, `experts`' load."""
    scope = PlanScope(
        batch_sizes=(c.batch_size,), tensor_parallel=(c.expert_parallel,), kv_cache_dtypes=(c.kv_cache_dtype,)
    )
    return plan_expert_parallel(
        performance,
        accel,
        c.base_scheme,
        skew=experts.skew,
        redundant_experts=experts.redundant_experts,
        scope=scope,
        network=_network(link, accel),
    )


def expert_parallel_winner_launch(
    performance: PerformanceEvaluator,
    winner: CandidateResult,
    *,
    link: str,
    model: str,
    experts: ExpertRouting | None = None,
) -> list[EngineLaunch]:
    """The expert-parallel commands of a search's winner as it was priced (its engine, degree, attention ranks,
    batch cap per rank and KV dtype), serving `model` (the winner's checkpoint or model); its engine's first, one
    entry per node where the replica spans several. A result stored before its attention ranks were kept is
    planned again (deterministic: the same row)."""
    c, experts = winner.candidate, experts or ExpertRouting()
    accel = performance.catalog.get(c.hardware)
    if winner.attention_dp is None or winner.serving is None:
        row = _planned(performance, c, accel, link, experts)
    else:
        row = ExpertParallelRow(
            accel.key,
            c.precision,
            c.method,
            engine=winner.serving.engine,
            ep=c.expert_parallel,
            attention_dp=winner.attention_dp,
            batch_size_per_rank=c.batch_size,
            kv_cache_dtype=c.kv_cache_dtype,
            redundant_experts=experts.redundant_experts,
            replicas=winner.cost.replicas if winner.cost is not None else None,  # what the deployment files run
        )
    return expert_parallel_launch(
        row,
        model=model,
        max_model_len=performance.traffic.max_model_len,
        gpus_per_node=accel.max_tensor_parallel,
        device=accel.device,
    )


def _checked(performance: PerformanceEvaluator, c: Candidate) -> Accelerator:
    """The candidate's GPU; `Refused` where expert parallelism is not modelled for `c` or nothing serves it."""
    if c.hardware == LOCAL_DEVICE:
        raise Refused("runnable", "expert parallelism is planned on catalog GPUs; the local device is one replica")
    if c.speculative != NONE or c.layout != AGGREGATED:
        raise Refused("runnable", "expert parallelism is modelled for aggregated replicas without speculation")
    accel = performance.catalog.get(c.hardware)
    served = eligibility(
        c.base_scheme, accel.device, performance.engines, performance.shape.head_dim, performance.shape.architectures
    )
    if not served.launchable:
        raise Refused("runnable", served.reason(accel.key))
    if (unpriced := performance.catalog.price_refusal(accel.key)) is not None:
        raise Refused("runnable", unpriced)
    return accel


def _network(link: str, accel: Accelerator) -> Link | None:
    """The spec's link between the nodes a replica spans, when it is a network link (else one node only)."""
    network = resolve_link(link, accel, field="space.link")
    return network if network.scope == "cluster" else None


def _result(
    performance: PerformanceEvaluator, c: Candidate, accel: Accelerator, row: ExpertParallelRow
) -> CandidateResult:
    assert row.ttft_p99_ms is not None and row.tpot_p99_ms is not None and row.provenance is not None
    assert row.requests_per_s_per_replica is not None and row.replicas is not None and row.ep is not None
    t, sla = performance.traffic, performance.sla
    rate = row.requests_per_s_per_replica
    serving = ServingEstimate(
        ttft_ms=Percentiles(math.nan, math.nan, row.ttft_p99_ms),
        tpot_ms=Percentiles(math.nan, math.nan, row.tpot_p99_ms),
        requests_per_s=rate,
        tokens_per_s=rate * (t.prompt_tokens + t.output_tokens),
        load_per_replica_rps=t.requests_per_second / row.replicas,
        provenance=row.provenance.extended(
            f"EP{row.ep} with {row.attention_dp} attention rank(s), busiest GPU {row.imbalance or 1:.2f}x the mean"
        ),
        engine=row.engine,
        ttft_p99_high_ms=row.ttft_p99_high_ms,
        tpot_p99_high_ms=row.tpot_p99_high_ms,
        confidence=sla.confidence,
    )
    hourly = accel.price_per_hour_usd
    cost = None
    if hourly is not None:
        cost = estimate_cost(
            price_per_hour_usd=hourly,
            price_source=accel.price_note,
            price_set=accel.price_set,
            tensor_parallel=row.ep,
            replica_tokens_per_s=serving.tokens_per_s,
            replica_requests_per_s=rate,
            target_requests_per_s=t.requests_per_second,
        )
    ttft, tpot, broken = latency_checks(serving, sla)
    constraints = Constraints(runnable=0.0, memory=0.0, quality=1.0, ttft=ttft, tpot=tpot)
    return CandidateResult(
        c,
        "evaluated",
        constraints,
        broken,
        serving=serving,
        cost=cost,
        engines=(row.engine,),
        attention_dp=row.attention_dp,
    )
