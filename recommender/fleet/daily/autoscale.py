"""Autoscaling over a day: replicas per hour for the recommended configuration, against a static fleet.

A fleet sized for the peak idles off-peak. With one replica's capacity at the SLA (the rate the
continuous-batching simulator finds it carries within the P99 limits, at the profile's lengths),
hour h needs ``ceil(rate_h x headroom / capacity)`` replicas, never fewer than ``min_replicas``;
the static fleet is the same rule at the peak hour, all day. The headroom covers bursts within
an hour and the minutes a new replica takes to start; the saving is what the off-peak hours
do not pay for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.provenance import Provenance

__all__ = ["AutoscaleSchedule", "HourReplicas", "replicas_for", "schedule"]


@dataclass(frozen=True, slots=True)
class HourReplicas:
    """One hour of the day: its mean rate and the replicas that carry it."""

    hour: int
    rate_rps: float
    replicas: int


@dataclass(frozen=True)
class AutoscaleSchedule:
    """Replicas per hour for one configuration, and $/month autoscaled against a static fleet for the peak.

    ``usd_per_replica_hour`` is the hourly price of one replica (all its GPUs); months are
    `HOURS_PER_MONTH` hours, each hour of the day repeated ``HOURS_PER_MONTH / 24`` times.
    """

    candidate_key: str
    capacity_rps: float
    headroom: float
    min_replicas: int
    hours: list[HourReplicas]
    static_replicas: int
    usd_per_replica_hour: float
    usd_per_month_autoscaled: float
    usd_per_month_static: float
    provenance: Provenance

    @property
    def saving_percent(self) -> float:
        static = self.usd_per_month_static
        return 100.0 * (static - self.usd_per_month_autoscaled) / static if static else 0.0

    @property
    def peak_rps(self) -> float:
        return max(h.rate_rps for h in self.hours)


def replicas_for(rate_rps: float, capacity_rps: float, *, headroom: float, min_replicas: int) -> int:
    """Replicas that carry `rate_rps` x `headroom` at `capacity_rps` each, at least `min_replicas`.

    The 1e-9 slack keeps an exact multiple from rounding up through floating-point error (as `cost.replicas_needed`).
    """
    if capacity_rps <= 0:
        raise ValueError("a replica that carries no traffic within the SLA cannot be autoscaled")
    return max(min_replicas, math.ceil(rate_rps * headroom / capacity_rps - 1e-9))


def schedule(
    rates_rps: list[float],
    *,
    candidate_key: str,
    capacity_rps: float,
    usd_per_replica_hour: float,
    headroom: float,
    min_replicas: int,
    provenance: Provenance,
) -> AutoscaleSchedule:
    """Replicas for each hour of `rates_rps` (hour 0 first) and the monthly bill, autoscaled and static."""
    hours = [
        HourReplicas(h, rate, replicas_for(rate, capacity_rps, headroom=headroom, min_replicas=min_replicas))
        for h, rate in enumerate(rates_rps)
    ]
    static = replicas_for(max(rates_rps), capacity_rps, headroom=headroom, min_replicas=min_replicas)
    days_per_month = HOURS_PER_MONTH / len(rates_rps)
    return AutoscaleSchedule(
        candidate_key=candidate_key,
        capacity_rps=capacity_rps,
        headroom=headroom,
        min_replicas=min_replicas,
        hours=hours,
        static_replicas=static,
        usd_per_replica_hour=usd_per_replica_hour,
        usd_per_month_autoscaled=sum(h.replicas for h in hours) * usd_per_replica_hour * days_per_month,
        usd_per_month_static=static * usd_per_replica_hour * HOURS_PER_MONTH,
        provenance=provenance.extended(f"replicas = ceil(hourly rate x {headroom:g} / capacity at the SLA)"),
    )
