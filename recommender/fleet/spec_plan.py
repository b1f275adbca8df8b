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
from recommender.fleet.daily.autoscale import AutoscaleSchedule
from recommender.fleet.daily.mix_plan import GpuMix, PoolOption
from recommender.fleet.daily.winner import ScheduledWinner, schedule_and_mix
from recommender.fleet.layouts.layout_compare import LayoutComparison
from recommender.fleet.layouts.parallelism import ParallelismComparison
from recommender.fleet.layouts.routing_compare import RoutingComparison
from recommender.fleet.plan import PLAN_METHODS, plan
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.fleet.plan_views import compare, views_of_space
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
    #: With ``space.routing``: each row that serves the traffic sized as a fleet behind each policy, the winner and
    #: why (`plan --routing`'s comparison); empty otherwise.
    routing: list[RoutingComparison] = field(default_factory=list)


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
    """Plan the spec's catalog GPUs x precisions for its peak hour, then autoscale the winner and solve the mix,
    then the comparisons its space searches (``plan_views.views_of_space``). `on_row` hears each planned (GPU,
    precision) pair of the rows (``plan.plan``)."""
    policy = spec.fleet or FleetPolicy()
    traffic, sla = spec.traffic, spec.sla
    engines = tuple(spec.engines)  # the rows, the schedule and the mix served by the same engines
    # The spec's batch caps, or (none listed) each engine's ladder to its maximum; its KV cache dtypes.
    scope = PlanScope(
        batch_sizes=tuple(spec.space.batch_sizes or ()),
        kv_cache_dtypes=tuple(spec.space.kv_cache_dtypes),
        engine_releases=spec.engine_releases,
    )
    request = PlanRequest(
        shape=shape,
        catalog=catalog,
        hardware=tuple(plan_hardware(spec)),
        precisions=tuple(plan_precisions(spec)),  # plan's own scheme per precision, cheapest degree that fits
        traffic=traffic,
        sla=sla,
        engines=engines,
        scope=scope,
        link=spec.space.link,
    )
    rows = plan(replace(request, on_row=on_row))
    winner = winner_row(rows)
    performance = PerformanceEvaluator(
        catalog, shape, traffic, sla, engines=engines, engine_releases=scope.engine_releases
    )
    options = [_option(r) for r in rows if r.usd_per_month is not None]
    scheduled = None if winner is None else _scheduled(winner, catalog)
    autoscale, mix = schedule_and_mix(spec, performance, options, scheduled)
    # The comparisons' pools and replicas carry commands serving the spec's model.source; the rows carry none.
    compared = compare(replace(request, model=spec.model.source), views_of_space(spec.space), rows)
    return FleetPlan(rows, winner, autoscale, mix, policy, compared.layouts, compared.parallelism, compared.routing)
