"""What the simulation tells a plan about one replica: the P99s at the load it carries, its capacity, and their basis.

Its own module (``serving.py`` re-exports it) so the rows, the report and the JSON read the estimate without the
simulation that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from recommender.perf.sim.physics_capacity import ALARM_FACTOR
from recommender.perf.sim.results import Percentiles
from recommender.provenance import Provenance

__all__ = ["LatencyLimits", "ServingEstimate"]


class LatencyLimits(Protocol):
    """The P99 limits a simulation is checked against (the spec's ``LatencySLA`` is one)."""

    @property
    def ttft_p99_ms(self) -> float: ...

    @property
    def tpot_p99_ms(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ServingEstimate:
    """Latency percentiles of one replica at the load it carries at the target traffic, and its capacity.

    ``ttft_ms``/``tpot_ms`` are P50/P95/P99 at ``load_per_replica_rps`` (the target rate over
    the replicas it needs); ``requests_per_s`` is the highest rate one replica carries within
    the SLA, ``tokens_per_s`` the prompt + output tokens at that rate.
    """

    ttft_ms: Percentiles
    tpot_ms: Percentiles
    requests_per_s: float
    tokens_per_s: float
    load_per_replica_rps: float
    provenance: Provenance
    #: The engine the figures are for ('' where none is modelled: the local device's measured steps).
    engine: str = ""
    #: Upper ends of the P99s' prediction intervals at `confidence` (None: no interval, measured step times).
    ttft_p99_high_ms: float | None = None
    tpot_p99_high_ms: float | None = None
    confidence: float | None = None
    #: The datasheet's throughput ceiling on one replica, no SLA (``physics_capacity.py``; None: the local device).
    physics_rps_per_replica: float | None = None
    #: The fraction of prompt tokens the replica's prefix cache served at its load (None: no prompt shares a prefix).
    prefix_hit_rate: float | None = None
    #: How many simulated requests the P99s at the load rest on, after the warm-up, and whether they settled (moved
    #: under ``settle.TOLERANCE`` when the count doubled); None: not simulated at a load (not even a lone request
    #: meets the SLA).
    requests_measured: int | None = None
    p99s_settled: bool | None = None
    #: How many requests the run behind those P99s simulated in all (warm-up and drain included): a later run of the
    #: same traffic at no more load starts from half of it (``settled_at``).
    requests_simulated: int | None = None
    #: Whether the P99s at `requests_per_s` itself settled: when its requests doubled in the capacity search's check,
    #: or, for a configuration shown, within the cap its P99s at the load settle within (``_settled_capacity``);
    #: None: not simulated. Where it and `p99s_settled` are not False a longer cap makes the same runs to the same end.
    capacity_settled: bool | None = None

    def p99_basis(self) -> str:
        """What the P99s rest on, for a reader ("2,400 requests, settled within 5%"); "" where not simulated."""
        if self.requests_measured is None:
            return ""
        return f"{self.requests_measured:,} requests, " + ("settled within 5%" if self.p99s_settled else "not settled")

    @property
    def physics_alarm(self) -> bool:
        """Whether the capacity within the SLA is under 1/``ALARM_FACTOR`` of the throughput ceiling (a capacity of
        0 is not flagged: not even a lone request meets the SLA, which is said elsewhere)."""
        ceiling = self.physics_rps_per_replica
        return ceiling is not None and 0 < self.requests_per_s < ceiling / ALARM_FACTOR

    def physics_alarm_reason(self, sla: LatencyLimits) -> str:
        """Why the capacity is far below the throughput ceiling: the SLA nearest its limit, or an error ("" when
        not flagged)."""
        if not self.physics_alarm:
            return ""
        ttft, tpot = self.ttft_p99_checked_ms, self.tpot_p99_checked_ms
        which, value, limit = (
            ("TTFT", ttft, sla.ttft_p99_ms)
            if ttft / sla.ttft_p99_ms >= tpot / sla.tpot_p99_ms
            else ("TPOT", tpot, sla.tpot_p99_ms)
        )
        return (
            f"{self.requests_per_s:.3g} req/s is under 1/{ALARM_FACTOR:g} of the {self.physics_rps_per_replica:.3g} "
            f"req/s throughput ceiling: the P99 {which} SLA binds (upper end {value:.4g} ms at this load, SLA "
            f"{limit:g} ms), or the prediction is off — check it (recommender estimate)"
        )

    @property
    def ttft_p99_checked_ms(self) -> float:
        """The P99 TTFT an SLA check reads: the interval's upper end where there is one."""
        return self.ttft_ms.p99 if self.ttft_p99_high_ms is None else self.ttft_p99_high_ms

    @property
    def tpot_p99_checked_ms(self) -> float:
        return self.tpot_ms.p99 if self.tpot_p99_high_ms is None else self.tpot_p99_high_ms
