"""Cost: dollars per million tokens at full use, and replicas and dollars per month at the target traffic.

Tokens are prompt plus output tokens (what a blended per-token price counts). A replica
is ``tensor_parallel`` accelerators; the hourly price is per accelerator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from recommender.perf.sim.capacity import replicas_needed

HOURS_PER_MONTH = 730.0
#: $/month within this fraction of the cheapest one are ties (the decision's tie band, `recommender.decision.rules`).
COST_TOLERANCE = 0.01

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CostEstimate:
    usd_per_1m_tokens: float
    replicas: int
    accelerators: int
    usd_per_month: float
    price_per_hour_usd: float
    price_source: str
    #: The named, dated price set the hourly price comes from (``perf/catalog/price_sets.yaml``), "hardware_catalog"
    #: for a contract price, "local_device" for this machine's; "" in results recorded before price sets.
    price_set: str = ""


def estimate_cost(
    *,
    price_per_hour_usd: float,
    price_source: str,
    tensor_parallel: int,
    replica_tokens_per_s: float,
    replica_requests_per_s: float,
    target_requests_per_s: float,
    price_set: str = "",
) -> CostEstimate:
    """Price per token at saturation, and the fleet the target traffic needs."""
    hourly = price_per_hour_usd * tensor_parallel
    per_million = hourly / (replica_tokens_per_s * 3600.0) * 1e6
    replicas = replicas_needed(target_requests_per_s, replica_requests_per_s)
    return CostEstimate(
        usd_per_1m_tokens=per_million,
        replicas=replicas,
        accelerators=replicas * tensor_parallel,
        usd_per_month=replicas * hourly * HOURS_PER_MONTH,
        price_per_hour_usd=price_per_hour_usd,
        price_source=price_source,
        price_set=price_set,
    )


def tie_band(items: Iterable[T], month: Callable[[T], float]) -> list[T]:
    """The items whose $/month is within ``COST_TOLERANCE`` of the cheapest one's (the decision's ties), in order:
    the one tie band for candidates, `plan`'s rows and the GPU mix's pools."""
    items = list(items)
    if not items:
        return []
    ceiling = min(month(i) for i in items) * (1 + COST_TOLERANCE)
    return [i for i in items if month(i) <= ceiling]
