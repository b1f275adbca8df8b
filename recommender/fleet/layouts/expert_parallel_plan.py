"""`plan --expert-parallel`: a MoE model served with attention data parallelism and expert parallelism on one node.

A replica of ``ep`` GPUs holds the routed experts ``(E + redundant) / ep`` per GPU and runs ``attention_dp``
attention ranks (``perf/model/expert_parallel.py``); its memory per GPU leaves each rank its KV cache
(``ep_memory``), its steps are the rank's calibrated features with the busiest GPU's experts and the modeled
all-to-all over the node's link (``perf/step/expert_parallel.py``). Each rank is simulated on the user's traffic
like an aggregated replica (capacity within the SLA with every step at its interval's upper end), a replica
carries ``attention_dp`` ranks' worth, and the target rate sets the replicas. Expert popularity is the caller's
``skew`` (Zipf exponent; 0 uniform), placed statically, or by EPLB when redundant experts are given. A replica
may span up to ``MAX_EP_NODES`` nodes, its all-to-all then crossing the named network link between them
(DeepSeek-V3 in FP8 does not fit one node of 80 GB GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS
from recommender.engines import PROFILES, EngineLaunch  # at run time: the row's types are resolved when serialized
from recommender.engines.batch_limits import batch_ladder
from recommender.engines.eligibility import eligibility
from recommender.errors import BadInputError
from recommender.evaluation.performance import GPU_MEMORY_UTILIZATION, PerformanceEvaluator
from recommender.fleet.plan_scope import LADDER_GAIN, PlanScope
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.expert_load import eplb_load, static_load, zipf_popularity
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_memory
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.perf.sim.capacity import replicas_needed
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.sim.serving import simulate_serving_interval
from recommender.perf.step.expert_parallel import AllToAllLinks, ExpertParallelStepFeatures, expert_parallel_step_costs
from recommender.provenance import Provenance  # at run time: the rows' types are resolved when serialized

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.link import Link
    from recommender.perf.model.moe import MoeLayout
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.sim.serving import ServingEstimate
    from recommender.perf.step.expert_parallel import ExpertParallelStepCost
    from recommender.quantize import QuantScheme

__all__ = [
    "ExpertParallelRow",
    "ep_degrees",
    "expert_imbalance",
    "plan_expert_parallel",
    "rank_step_costs",
    "require_moe",
]


@dataclass(frozen=True, slots=True)
class ExpertParallelRow:
    """The cheapest expert-parallel replica of one GPU at one precision, or why there is none (`note`)."""

    hardware: str
    precision: str
    method: str
    engine: str = ""
    ep: int | None = None
    attention_dp: int | None = None
    redundant_experts: int = 0
    imbalance: float | None = None
    batch_size_per_rank: int | None = None
    kv_cache_dtype: str = "auto"
    requests_per_s_per_replica: float | None = None
    replicas: int | None = None
    gpus: int | None = None
    usd_per_month: float | None = None
    ttft_p99_ms: float | None = None
    ttft_p99_high_ms: float | None = None
    tpot_p99_ms: float | None = None
    tpot_p99_high_ms: float | None = None
    note: str = ""
    provenance: Provenance | None = None
    #: The command that launches the replica on its engine with expert parallelism, one line per node where it
    #: spans several ("" where nothing is served, the engine's command is not emitted, or no model was named); as
    #: `PlanRow.launch`, a checkpoint scheme serves ``<model name>-<scheme>``.
    launch: str = ""
    #: The frameworks' deployment files of that launch (llm-d's LeaderWorkerSet, Dynamo's DynamoGraphDeployment) with
    #: the row's replicas, nodes and flags, and a note for a framework that does not deploy it
    #: (``deploy/expert_parallel.py``); empty where `launch` is.
    deployments: list[EngineLaunch] = field(default_factory=list)


def expert_imbalance(n_experts: int, ep: int, *, skew: float, redundant: int) -> float:
    """The busiest GPU's expert load over the mean: 1 when uniform, static placement, or EPLB with redundant slots."""
    if skew == 0:
        return 1.0
    popularity = zipf_popularity(n_experts, skew)
    return (eplb_load(popularity, ep, redundant) if redundant else static_load(popularity, ep)).imbalance


#: The most nodes one expert-parallel replica spans.
MAX_EP_NODES = 4


def ep_degrees(accel: Accelerator, slots: int, scope: PlanScope, *, network: bool) -> list[int]:
    """EP degrees that split the expert slots: the scope's tensor-parallel degrees if given, else powers of two up
    to one node (up to ``MAX_EP_NODES`` nodes with a network link)."""
    most = accel.max_tensor_parallel * (MAX_EP_NODES if network else 1)
    return [d for d in scope.degrees(most) if d > 1 and slots % d == 0]


@dataclass(frozen=True, slots=True)
class _Try:
    engine: str
    layout: ExpertParallelLayout
    cap: int
    kv: str
    network: Link | None = None


def _evaluate(
    performance: PerformanceEvaluator, accel: Accelerator, method: QuantScheme, t: _Try, skew: float
) -> ExpertParallelRow | None:
    """One replica configuration simulated on the traffic (None: its KV cache cannot hold one request)."""
    shape, traffic, sla = performance.shape, performance.traffic, performance.sla
    memory = ep_memory(
        shape,
        t.layout,
        bits_per_weight=method.bits_per_weight,
        device_gb=accel.device_memory_gb,
        memory_utilization=GPU_MEMORY_UTILIZATION,
        max_num_seqs=t.cap,
        kv_cache_dtype=t.kv,
        pool_context=traffic.mean_prompt_tokens,  # window layers held per sequence (``ep_memory``)
    )
    if memory.kv_tokens_per_rank < traffic.max_model_len:
        return None
    imbalance, point, upper = _rank_step_costs(performance, accel, method, t, skew)
    config = PROFILES[t.engine].batching(
        SchedulerConfig(
            kv_cache_tokens=memory.kv_tokens_per_rank,
            max_num_seqs=t.cap,
            max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, t.cap),
        )
    )
    # The rank simulated as if it were a replica: its P99s at the target over the ranks it needs alone, at least
    # the load each rank carries once replicas round up (conservative).
    rank = simulate_serving_interval(
        point,
        upper,
        config,
        traffic=performance.load,
        sla=performance.simulated_sla(t.engine, point.rank),
        engine=t.engine,
        confidence=sla.confidence,
        ttft_offset_ms=performance.request_overhead_ms(t.engine, point.rank),
    )
    return _row(accel, method, t, imbalance, rank, traffic.requests_per_second)


def _rank_step_costs(
    performance: PerformanceEvaluator, accel: Accelerator, method: QuantScheme, t: _Try, skew: float
) -> tuple[float, ExpertParallelStepCost, ExpertParallelStepCost]:
    """One attention rank's busiest-GPU expert imbalance and its step cost at the point and at the interval's upper
    end, the all-to-all over the node's link (and `t.network` between nodes when the replica spans several)."""
    return rank_step_costs(
        performance, accel, method, engine=t.engine, layout=t.layout, kv=t.kv, skew=skew, network=t.network
    )


def rank_step_costs(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    method: QuantScheme,
    *,
    engine: str,
    layout: ExpertParallelLayout,
    kv: str,
    skew: float,
    network: Link | None,
) -> tuple[float, ExpertParallelStepCost, ExpertParallelStepCost]:
    """As ``_rank_step_costs``, for any caller that prices one attention rank of `layout` (a disaggregated pool's
    expert-parallel worker, ``pool_workers.py``)."""
    shape = performance.shape
    assert shape.moe is not None
    imbalance = expert_imbalance(shape.moe.n_experts, layout.ep, skew=skew, redundant=layout.redundant_experts)
    node = resolve_link("nvlink" if accel.interconnect.kind.startswith("nvlink") else "pcie", accel)
    features = ExpertParallelStepFeatures(shape, method, accel, layout, imbalance, kv)
    point, upper = expert_parallel_step_costs(
        performance.calibrated,
        features,
        engine,
        AllToAllLinks(node, network if layout.ep > accel.max_tensor_parallel else None, accel.max_tensor_parallel),
        confidence=performance.sla.confidence,
    )
    return imbalance, point, upper


def _row(
    accel: Accelerator, method: QuantScheme, t: _Try, imbalance: float, rank: ServingEstimate, target_rps: float
) -> ExpertParallelRow:
    """The plan row of a simulated rank: a replica carries `attention_dp` ranks' worth; replicas, GPUs and price
    at the target rate."""
    per_replica = rank.requests_per_s * t.layout.attention_dp
    replicas = replicas_needed(target_rps, per_replica) if per_replica > 0 else None
    gpus = None if replicas is None else replicas * t.layout.ep
    hourly = accel.price_per_hour_usd
    return ExpertParallelRow(
        hardware=accel.key,
        precision=method.precision,
        method=method.name,
        engine=t.engine,
        ep=t.layout.ep,
        attention_dp=t.layout.attention_dp,
        redundant_experts=t.layout.redundant_experts,
        imbalance=imbalance,
        batch_size_per_rank=t.cap,
        kv_cache_dtype=t.kv,
        requests_per_s_per_replica=per_replica,
        replicas=replicas,
        gpus=gpus,
        usd_per_month=None if gpus is None or hourly is None else gpus * hourly * HOURS_PER_MONTH,
        ttft_p99_ms=rank.ttft_ms.p99,
        ttft_p99_high_ms=rank.ttft_p99_high_ms,
        tpot_p99_ms=rank.tpot_ms.p99,
        tpot_p99_high_ms=rank.tpot_p99_high_ms,
        provenance=rank.provenance,
    )


def _rank(row: ExpertParallelRow) -> tuple[float, float]:
    """Fewest GPUs at the target traffic, then the most capacity per GPU."""
    return (row.gpus or math.inf, -(row.requests_per_s_per_replica or 0.0) / (row.ep or 1))


def _ladder(
    performance: PerformanceEvaluator, accel: Accelerator, method: QuantScheme, tries: list[_Try], skew: float
) -> list[ExpertParallelRow]:
    """The batch caps of one layout climbed in order, stopped where a cap no longer fits its KV cache or carries
    under ``LADDER_GAIN`` more than the best so far (``plan_scope``'s rule for aggregated replicas)."""
    rows: list[ExpertParallelRow] = []
    best = 0.0
    for t in tries:
        row = _evaluate(performance, accel, method, t, skew)
        if row is None:  # a larger cap leaves less room still
            break
        rate = row.requests_per_s_per_replica or 0.0
        if row.gpus is not None:
            rows.append(row)
        if best > 0 and rate < best * LADDER_GAIN:
            break
        best = max(best, rate)
    return rows


def plan_expert_parallel(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    method: QuantScheme,
    *,
    skew: float = 0.0,
    redundant_experts: int = 0,
    scope: PlanScope | None = None,
    network: Link | None = None,
) -> ExpertParallelRow:
    """The cheapest (engine, EP degree, attention ranks 1 or all, KV dtype, batch cap per rank) of `accel`, on one
    node or, with a `network` link, up to ``MAX_EP_NODES``: fewest GPUs at the target traffic, then the most
    capacity per GPU."""
    shape, scope = performance.shape, scope or PlanScope()
    moe = require_moe(shape)
    degrees = ep_degrees(accel, moe.n_experts + redundant_experts, scope, network=network is not None)
    caps = list(scope.batch_sizes) or batch_ladder(performance.engines, DEFAULT_MAX_BATCHED_TOKENS)
    engines = eligibility(method, accel.device, performance.engines, shape.head_dim, shape.architectures).engines
    best: ExpertParallelRow | None = None
    for engine in engines:
        for ep in degrees:
            for dp in sorted({1, ep}):
                layout = ExpertParallelLayout(ep, dp, redundant_experts)
                for kv in scope.kv_cache_dtypes:
                    for row in _ladder(
                        performance, accel, method, [_Try(engine, layout, c, kv, network) for c in caps], skew
                    ):
                        if best is None or _rank(row) < _rank(best):
                            best = row
    if best is None:
        why = (
            f"no expert-parallel replica of {degrees} {accel.key} GPUs holds a request and meets the SLA"
            if degrees
            else f"no degree of a {accel.max_tensor_parallel}-GPU node splits the experts"
        )
        return ExpertParallelRow(accel.key, method.precision, method.name, note=why)
    return best


def require_moe(shape: ModelShape) -> MoeLayout:
    """The model's experts, or the one-line refusal for a dense model."""
    if shape.moe is None:
        raise BadInputError(
            "--expert-parallel",
            "expert parallelism needs a mixture-of-experts model",
            "serve a dense model with tensor parallelism (drop --expert-parallel)",
        )
    return shape.moe
