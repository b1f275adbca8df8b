"""The workers a disaggregated pool chooses from: tensor-parallel, or expert-parallel with data-parallel attention.

A pool's worker is one engine instance (its GPUs, its batch cap) simulated on the pool's job
(``perf/sim/disaggregated.py``). A tensor-parallel worker is what an aggregated replica would be (the memory plan
and calibrated step costs of ``PerformanceEvaluator``). With ``plan --layout disaggregated --expert-parallel``, a
mixture-of-experts model's pools may also take an expert-parallel worker, priced exactly as ``plan
--expert-parallel`` prices an aggregated replica (``expert_parallel_plan.py``, the model the MoE calibration replay
``perf/fit/moe_rows.py`` also uses for TensorRT-LLM's EP decode pools): ``ep`` GPUs holding ``(E + redundant) /
ep`` routed experts each (``ep_memory``), ``attention_dp`` attention ranks each with its own sequences and KV cache,
one rank's steps the calibrated features with the busiest GPU's experts (the caller's Zipf skew, placed by EPLB
over the redundant experts) plus the modeled dispatch/combine all-to-all over the node's link (and the network link
between nodes when a worker spans several). One rank is simulated; the worker carries its ``attention_dp`` ranks'
worth (``PoolSetup.ranks``). The decode pool is where it pays most: a big decode batch spread over many attention
ranks, MLA's latent no longer copied on every GPU of a tensor-parallel group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS, Candidate
from recommender.engines import PROFILES
from recommender.engines.eligibility import eligibility
from recommender.evaluation.performance import GPU_MEMORY_UTILIZATION
from recommender.evaluation.refusal import Refused
from recommender.evaluation.two_pools import PoolChoice
from recommender.fleet.layouts.expert_parallel_plan import ep_degrees, expert_imbalance, rank_step_costs, require_moe
from recommender.perf.model.expert_load import check_expert_split
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_memory
from recommender.perf.sim.disaggregated import PoolSetup
from recommender.perf.sim.scheduler_config import SchedulerConfig

if TYPE_CHECKING:
    from recommender.config.candidate import KVCacheDtype
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.fleet.plan_scope import PlanScope
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.link import Link
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.sim.disaggregated import PoolEstimate
    from recommender.quantize import QuantScheme

__all__ = ["ExpertParallelPools", "ExpertParallelWorker", "PoolWorker", "TensorParallelWorker", "WorkerContext"]


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What every worker of a pool shares: the evaluator, the GPU, the scheme, the engine and the KV cache dtype."""

    performance: PerformanceEvaluator
    accel: Accelerator
    method: QuantScheme
    precision: str
    engine: str
    kv: KVCacheDtype


@dataclass(frozen=True, slots=True)
class TensorParallelWorker:
    """A worker of `tensor_parallel` GPUs, as an aggregated replica of that degree."""

    tensor_parallel: int

    @property
    def attention_tp(self) -> int:
        return self.tensor_parallel

    def setup(self, ctx: WorkerContext, cap: int) -> PoolSetup | None:
        """The worker at batch cap `cap` (None: it does not run or fit, or the engine does not serve it)."""
        performance = ctx.performance
        c = Candidate(
            ctx.precision, ctx.method.name, ctx.accel.key, cap, self.tensor_parallel, DEFAULT_MAX_BATCHED_TOKENS, ctx.kv
        )
        try:
            setup = performance.setup(c)
        except Refused:
            return None
        if ctx.engine not in setup.engines:
            return None
        point = performance.calibrated.step_cost(
            performance.shape,
            ctx.method,
            ctx.accel,
            ctx.engine,
            tensor_parallel=self.tensor_parallel,
            kv_cache_dtype=ctx.kv,
        )
        launched = replace(setup.scheduler, max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size))
        return PoolSetup(
            point,
            performance.checked_step_cost(point, ctx.engine),
            PROFILES[ctx.engine].batching(launched),
            self.tensor_parallel,
            performance.request_overhead_ms(ctx.engine, point),
        )

    def choice(self, ctx: WorkerContext, cap: int, estimate: PoolEstimate) -> PoolChoice:
        return PoolChoice(self.tensor_parallel, cap, estimate)


@dataclass(frozen=True, slots=True)
class ExpertParallelWorker:
    """A worker of `layout.ep` GPUs, the experts split over them, `layout.attention_dp` attention ranks."""

    layout: ExpertParallelLayout
    skew: float = 0.0
    #: The link between the nodes a worker spans (None: one node only).
    network: Link | None = None

    @property
    def attention_tp(self) -> int:
        return self.layout.attention_tp

    def setup(self, ctx: WorkerContext, cap: int) -> PoolSetup | None:
        """One attention rank at batch cap `cap` (None: the engine does not serve the scheme here, or the rank's KV
        cache cannot hold one request), as ``expert_parallel_plan._evaluate`` prices it."""
        performance, accel, layout = ctx.performance, ctx.accel, self.layout
        served = eligibility(
            ctx.method, accel.device, performance.engines, performance.shape.head_dim, performance.shape.architectures
        ).engines
        if ctx.engine not in served:
            return None
        memory = ep_memory(
            performance.shape,
            layout,
            bits_per_weight=ctx.method.bits_per_weight,
            device_gb=accel.device_memory_gb,
            memory_utilization=GPU_MEMORY_UTILIZATION,
            max_num_seqs=cap,
            kv_cache_dtype=ctx.kv,
            pool_context=performance.traffic.mean_prompt_tokens,  # window layers held per sequence (``ep_memory``)
        )
        if memory.kv_tokens_per_rank < performance.traffic.max_model_len:
            return None
        _, point, upper = rank_step_costs(
            performance,
            accel,
            ctx.method,
            engine=ctx.engine,
            layout=layout,
            kv=ctx.kv,
            skew=self.skew,
            network=self.network,
        )
        config = SchedulerConfig(
            kv_cache_tokens=memory.kv_tokens_per_rank,
            max_num_seqs=cap,
            max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, cap),
        )
        return PoolSetup(
            point,
            upper,
            PROFILES[ctx.engine].batching(config),
            layout.ep,
            performance.request_overhead_ms(ctx.engine, point.rank),
            ranks=layout.attention_dp,
        )

    def choice(self, ctx: WorkerContext, cap: int, estimate: PoolEstimate) -> PoolChoice:
        moe = ctx.performance.shape.moe
        assert moe is not None  # ExpertParallelPools.workers offers this worker only to a MoE model
        layout = self.layout
        imbalance = expert_imbalance(moe.n_experts, layout.ep, skew=self.skew, redundant=layout.redundant_experts)
        return PoolChoice(
            layout.attention_tp,
            cap,
            estimate,
            expert_parallel=layout.ep,
            attention_dp=layout.attention_dp,
            redundant_experts=layout.redundant_experts,
            imbalance=imbalance,
        )


#: A pool's worker, either layout.
PoolWorker = TensorParallelWorker | ExpertParallelWorker


@dataclass(frozen=True, slots=True)
class ExpertParallelPools:
    """What ``--expert-parallel`` adds to a disaggregated plan: the expert-parallel workers each pool may take.

    Args:
        skew: expert popularity as a Zipf exponent (0: uniform), as ``plan --expert-skew``.
        redundant_experts: extra expert slots per MoE layer placed by EPLB, as ``plan --redundant-experts``.
        network: the link between the nodes of a worker spanning several (None: workers of one node).
        degrees: the EP degrees to try (a search space's ``expert_parallel``); empty: the plan scope's
            tensor-parallel degrees, as ``plan --expert-parallel`` takes them.
    """

    skew: float = 0.0
    redundant_experts: int = 0
    network: Link | None = None
    degrees: tuple[int, ...] = ()

    def check(self, shape: ModelShape, scope: PlanScope) -> None:
        """Bad input naming the flag: a dense model (``--expert-parallel``), or a ``--tensor-parallel`` degree
        that does not split the experts and redundant slots (as ``plan --expert-parallel`` refuses them)."""
        moe = require_moe(shape)
        for degree in self.degrees or scope.tensor_parallel:
            check_expert_split(moe.n_experts, degree, self.redundant_experts, field="--tensor-parallel")

    def on(self, link: Link) -> ExpertParallelPools:
        """These pools with `link` between the nodes of a worker where it is a network link (else one node)."""
        return replace(self, network=link if link.scope == "cluster" else None)

    def workers(self, performance: PerformanceEvaluator, accel: Accelerator, scope: PlanScope) -> list[PoolWorker]:
        """Each EP degree that splits the expert slots (``ep_degrees``: the scope's degrees, else powers of two up
        to a node, or ``MAX_EP_NODES`` nodes with a network link) with 1 or all of its GPUs as attention ranks."""
        moe = performance.shape.moe
        if moe is None:
            return []
        slots = moe.n_experts + self.redundant_experts
        scope = replace(scope, tensor_parallel=self.degrees) if self.degrees else scope
        found: list[PoolWorker] = []
        for ep in ep_degrees(accel, slots, scope, network=self.network is not None):
            for dp in sorted({1, ep}):
                layout = ExpertParallelLayout(ep, dp, self.redundant_experts)
                found.append(ExpertParallelWorker(layout, self.skew, self.network))
        return found
