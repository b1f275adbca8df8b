"""What a search's daily profile adds to its recommendation: the winner's replica schedule and the GPU mix.

The same answers `recommender plan --spec` gives, from the search's own results: the winner's capacity at
the SLA (simulated on the profile's lengths) sets its replicas hour by hour, and the GPU mix chooses among
the feasible candidates only — measured quality passed, latency and memory met — one per GPU and scheme.
Local-device candidates stay out of the mix: their step times were measured at the spec's mean prompt
only, not at each bucket's lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.config.spec import LOCAL_DEVICE
from recommender.config.traffic import FleetPolicy, hourly_rates
from recommender.fleet.daily.autoscale import AutoscaleSchedule, schedule
from recommender.fleet.daily.length_buckets import length_buckets
from recommender.fleet.daily.mix_plan import GpuMix, PoolOption, plan_mix

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.provenance import Provenance

__all__ = ["ScheduledWinner", "daily_answers", "schedule_and_mix"]


@dataclass(frozen=True, slots=True)
class ScheduledWinner:
    """What a replica schedule needs of the recommended configuration: its capacity at the SLA and its price."""

    key: str
    capacity_rps: float
    usd_per_replica_hour: float
    provenance: Provenance


def schedule_and_mix(
    spec: SearchSpec, performance: PerformanceEvaluator, options: list[PoolOption], winner: ScheduledWinner | None
) -> tuple[AutoscaleSchedule | None, GpuMix | None]:
    """The winner's replicas hour by hour over the spec's day, and the cheapest GPU mix among `options`: the one
    computation behind `recommender plan SPEC` (modeled rows) and the search (measured candidates)."""
    policy, traffic = spec.fleet or FleetPolicy(), spec.traffic
    rates = hourly_rates(traffic.profile, traffic.requests_per_second)
    autoscale = (
        None
        if winner is None
        else schedule(
            rates,
            candidate_key=winner.key,
            capacity_rps=winner.capacity_rps,
            usd_per_replica_hour=winner.usd_per_replica_hour,
            headroom=policy.headroom,
            min_replicas=policy.min_replicas,
            provenance=winner.provenance,
        )
    )
    buckets = length_buckets(traffic.profile, traffic.prompt_tokens, traffic.output_tokens, policy.prompt_buckets)
    mix = (
        plan_mix(performance, options, buckets, hourly_rps=rates, headroom=policy.headroom, model=spec.model.source)
        if options
        else None
    )
    return autoscale, mix


def _mix_options(results: list[CandidateResult]) -> list[PoolOption]:
    """The cheapest feasible candidate of each (GPU, scheme, tensor-parallel degree), its quality verdict measured."""
    best: dict[tuple[str, str, int], CandidateResult] = {}
    for r in results:
        c = r.candidate
        if not r.feasible or r.usd_per_month is None or c.hardware == LOCAL_DEVICE:
            continue
        key = (c.hardware, c.method, c.tensor_parallel)
        if key not in best or r.usd_per_month < (best[key].usd_per_month or 0.0):
            best[key] = r
    return [PoolOption(r.candidate, f"measured: {r.quality_verdict}") for r in best.values()]


def daily_answers(
    spec: SearchSpec, performance: PerformanceEvaluator, results: list[CandidateResult], winner: CandidateResult
) -> tuple[AutoscaleSchedule | None, GpuMix | None]:
    """The winner's schedule over the profile's day and the GPU mix among the feasible candidates."""
    scheduled = None
    if winner.serving is not None and winner.cost is not None and winner.serving.requests_per_s > 0:
        scheduled = ScheduledWinner(
            winner.key,
            winner.serving.requests_per_s,
            winner.cost.price_per_hour_usd * winner.candidate.tensor_parallel,
            winner.serving.provenance,
        )
    return schedule_and_mix(spec, performance, _mix_options(results), scheduled)
