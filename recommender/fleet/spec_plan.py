"""`recommender plan SPEC`: the architecture-only plan of a spec's space, then what its daily profile changes.

Three answers from one set of modeled figures: the cheapest single configuration for the peak
hour (the plan's rows, every figure modeled, quality a labelled prior), its replicas hour by hour
against a static fleet sized for the peak (`autoscale`), and the cheapest mix of GPU types
routed by prompt length (`mix_plan`), or how much the single type wins by.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from recommender.config.spec import LOCAL_DEVICE, SearchSpec
from recommender.config.traffic import FleetPolicy
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.autoscale import AutoscaleSchedule
from recommender.fleet.daily import ScheduledWinner, schedule_and_mix
from recommender.fleet.layout_compare import LayoutComparison, plan_layouts
from recommender.fleet.mix_plan import GpuMix, PoolOption
from recommender.fleet.parallelism import ParallelismComparison, plan_parallelism
from recommender.fleet.plan import PLAN_METHODS, plan
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.fleet.pool_workers import ExpertParallelPools
from recommender.perf.catalog.gpus import Catalog
from recommender.perf.model.shape import ModelShape
from recommender.perf.pricing import tie_band
from recommender.quantize.precisions import least_quantized

__all__ = ["FleetPlan", "plan_fleet", "winner_row"]


@dataclass(frozen=True)
class FleetPlan:
    """The plan's rows at the peak hour, the configuration it recommends, its schedule, and the GPU mix."""

    rows: list[PlanRow]
    winner: PlanRow | None
    autoscale: AutoscaleSchedule | None
    mix: GpuMix | None
    policy: FleetPolicy
    #: With ``space.layout: [..., disaggregated]``: each GPU and precision's aggregated row against its pools, the
    #: winner and why (`plan --layout`'s comparison at the spec's link; with ``space.expert_parallel`` degrees above
    #: 1, each pool may be expert-parallel at those degrees); empty otherwise.
    layouts: list[LayoutComparison] = field(default_factory=list)
    #: With ``space.expert_parallel`` degrees above 1: tensor against expert parallelism per GPU and precision
    #: (`plan --expert-parallel`'s comparison at those degrees); empty otherwise.
    parallelism: list[ParallelismComparison] = field(default_factory=list)


def winner_row(rows: list[PlanRow]) -> PlanRow | None:
    """The cheapest row per month at the peak; within the tie tolerance, the least quantized (the decision's rule)."""
    priced = [r for r in rows if r.usd_per_month is not None]
    tied = tie_band(priced, lambda r: r.usd_per_month or math.inf)
    return min(tied, key=lambda r: (least_quantized(r.precision), r.usd_per_month, r.usd_per_1m_tokens), default=None)


def _scheduled(winner: PlanRow, catalog: Catalog) -> ScheduledWinner | None:
    if winner.result is None or winner.max_rps_per_replica is None or winner.provenance is None:
        return None
    price = catalog.hourly_price(winner.hardware) * winner.result.candidate.tensor_parallel
    return ScheduledWinner(winner.result.candidate.key, winner.max_rps_per_replica, price, winner.provenance)


def _option(row: PlanRow) -> PoolOption:
    assert row.result is not None  # priced rows only
    return PoolOption(row.result.candidate, f"{row.quality} [{row.quality_verdict}]")


def plan_hardware(spec: SearchSpec) -> list[str]:
    """The spec's catalog GPUs (`plan` has no model of the local device)."""
    return [h for h in spec.space.hardware if h != LOCAL_DEVICE]


def plan_precisions(spec: SearchSpec) -> list[str]:
    """The spec's precisions `plan` has a scheme for (PLAN_METHODS), in the spec's order."""
    return [p for p in spec.space.schemes if p in PLAN_METHODS]


def plan_fleet(
    spec: SearchSpec, shape: ModelShape, catalog: Catalog, on_row: Callable[[str], None] | None = None
) -> FleetPlan:
    """Plan the spec's catalog GPUs x precisions for its peak hour, then autoscale the winner and solve the mix.
    `on_row` hears each planned (GPU, precision) pair (``plan.plan``)."""
    policy = spec.fleet or FleetPolicy()
    traffic, sla = spec.traffic, spec.sla
    hardware = plan_hardware(spec)
    precisions = plan_precisions(spec)  # plan's own scheme per precision (PLAN_METHODS), cheapest degree that fits
    engines = tuple(spec.engines)  # the rows, the schedule and the mix served by the same engines
    # The spec's batch caps, or (none listed) each engine's ladder to its maximum; its KV cache dtypes.
    scope = PlanScope(
        batch_sizes=tuple(spec.space.batch_sizes or ()), kv_cache_dtypes=tuple(spec.space.kv_cache_dtypes)
    )
    rows = plan(
        shape,
        catalog,
        hardware=hardware,
        precisions=precisions,
        traffic=traffic,
        sla=sla,
        scope=scope,
        on_row=on_row,
        engines=engines,
    )
    winner = winner_row(rows)
    performance = PerformanceEvaluator(catalog, shape, traffic, sla, engines=engines)
    options = [_option(r) for r in rows if r.usd_per_month is not None]
    scheduled = None if winner is None else _scheduled(winner, catalog)
    autoscale, mix = schedule_and_mix(spec, performance, options, scheduled)
    layouts, parallelism = _layout_views(spec, shape, catalog, hardware, precisions, scope)
    return FleetPlan(rows, winner, autoscale, mix, policy, layouts, parallelism)


def _layout_views(
    spec: SearchSpec,
    shape: ModelShape,
    catalog: Catalog,
    hardware: list[str],
    precisions: list[str],
    scope: PlanScope,
) -> tuple[list[LayoutComparison], list[ParallelismComparison]]:
    """The layouts' comparison (``space.layout`` with disaggregated; its pools expert-parallel too at the space's
    ``expert_parallel`` degrees above 1) and tensor against expert parallelism (those degrees); empty where not
    searched. The space's expert skew and redundant experts load every EP worker's busiest GPU."""
    traffic, sla, engines, space = spec.traffic, spec.sla, tuple(spec.engines), spec.space
    layouts = []
    degrees = tuple(d for d in space.expert_parallel if d > 1)
    if "disaggregated" in space.layout:
        pools = ExpertParallelPools(space.expert_skew, space.redundant_experts, degrees=degrees) if degrees else None
        layouts = plan_layouts(
            shape,
            catalog,
            hardware=hardware,
            precisions=precisions,
            traffic=traffic,
            sla=sla,
            link=space.link,
            scope=replace(scope, tensor_parallel=tuple(space.tensor_parallel)),  # the pools' degrees searched
            engines=engines,
            model=spec.model.source,
            decode_hardware=space.decode_hardware,  # the search's decode GPUs, as `--decode-hardware`
            expert_parallel=pools,  # EP pools at those degrees
        )
    parallelism = []
    if degrees:
        parallelism = plan_parallelism(
            shape,
            catalog,
            hardware=hardware,
            precisions=precisions,
            traffic=traffic,
            sla=sla,
            scope=replace(scope, tensor_parallel=degrees),
            engines=engines,
            skew=space.expert_skew,
            redundant_experts=space.redundant_experts,
            link=space.link,
            model=spec.model.source,
        )
    return layouts, parallelism
