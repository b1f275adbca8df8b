"""How many replicas a fleet behind a router needs: the fleet simulated at the whole traffic, N replicas at a time.

One replica's capacity times N assumes every replica sees what the one simulated saw; with prefix caching it
does not: behind round-robin a conversation's next turn finds its history on one replica in N, so each replica
prefills more and carries less. Here the fleet itself is simulated (``fleet.py``: the router splits the whole
traffic, each replica runs with its own cache) at N replicas, and N moves from a starting count (one replica's
answer) down while the SLA still holds, or up until it does. The P99s judged are over every request of the fleet,
judged as one replica's run is (``settle.probe``: the warm-up and the drain dropped, a backlog that grows while
the time to first token climbs called overloaded and refused whatever its P99s).

Each replica gets `per_replica` requests on average (the whole run is N times that, capped at
``MAX_FLEET_REQUESTS``), and a run with conversations lasts at least ``CONVERSATION_SPANS`` times one
conversation's span (turns x think time), so the caches reach the steady mix of first and later turns a long run
has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.sim.fleet import FleetResult, simulate_fleet
from recommender.perf.sim.settle import FIRST_REQUESTS, Settled, probe
from recommender.perf.sim.workload import make_workload

if TYPE_CHECKING:
    from recommender.perf.sim.routing import Router
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.traffic_load import TrafficLoad
    from recommender.perf.step.cost import StepCostModel

__all__ = ["CONVERSATION_SPANS", "MAX_FLEET_REQUESTS", "FleetSizing", "size_fleet"]

#: The most requests one fleet simulation takes (every replica's together).
MAX_FLEET_REQUESTS = 200_000
#: A conversation workload's run lasts at least this many conversation spans (turns x think time).
CONVERSATION_SPANS = 4.0


@dataclass(frozen=True)
class FleetSizing:
    """The fewest replicas found within the SLA behind the router (`met`), or the most tried (not `met`), the
    fleet's run there (`result`), its requests judged (`judged`: P99s over the measured window), and every count
    tried in order."""

    replicas: int
    met: bool
    result: FleetResult
    judged: Settled
    tried: tuple[int, ...]


@dataclass(frozen=True)
class _Trials:
    cost: StepCostModel
    config: SchedulerConfig
    traffic: TrafficLoad
    router: Router
    ttft_p99_ms: float
    tpot_p99_ms: float
    per_replica: int
    speculation: SpeculativeDecoding | None

    def requests(self, replicas: int) -> int:
        n = replicas * self.per_replica
        talk = self.traffic.conversation
        if talk is not None:
            n = max(
                n, math.ceil(self.traffic.requests_per_second * CONVERSATION_SPANS * talk.turns * talk.think_time_s)
            )
        return min(n, MAX_FLEET_REQUESTS)

    def run(self, replicas: int) -> tuple[bool, FleetResult, Settled]:
        t, n = self.traffic, self.requests(replicas)
        workload = make_workload(
            prompt=t.prompt, output=t.output, n_requests=n, rate=t.requests_per_second, **t.sharing
        )
        fleet = simulate_fleet(
            self.cost, workload, self.config, replicas=replicas, router=self.router, speculation=self.speculation
        )
        judged = probe(lambda _: fleet.fleet, t.requests_per_second, n)
        ttft, tpot = judged.result.ttft_ms.p99, judged.result.tpot_ms.p99
        met = ttft <= self.ttft_p99_ms and (math.isnan(tpot) or tpot <= self.tpot_p99_ms) and not judged.overloaded
        return met, fleet, judged


def size_fleet(
    cost: StepCostModel,
    config: SchedulerConfig,
    *,
    traffic: TrafficLoad,
    router: Router,
    ttft_p99_ms: float,
    tpot_p99_ms: float,
    start: int,
    max_replicas: int,
    per_replica: int = FIRST_REQUESTS,
    speculation: SpeculativeDecoding | None = None,
) -> FleetSizing:
    """The fewest replicas of `config` behind `router` whose fleet meets both P99 limits at `traffic`'s rate: from
    `start` down while they hold, else up until they do (at most `max_replicas`)."""
    if not 1 <= start <= max_replicas:
        raise ValueError(f"need 1 <= start <= max_replicas, got {start} and {max_replicas}")
    trials = _Trials(cost, config, traffic, router, ttft_p99_ms, tpot_p99_ms, max(per_replica, 1), speculation)
    met, result, judged = trials.run(start)
    tried, n = [start], start
    if met:
        while n > 1:
            lower_met, lower, lower_judged = trials.run(n - 1)
            tried.append(n - 1)
            if not lower_met:
                break
            n, result, judged = n - 1, lower, lower_judged
        return FleetSizing(n, True, result, judged, tuple(tried))
    while n < max_replicas:
        n += 1
        met, result, judged = trials.run(n)
        tried.append(n)
        if met:
            break
    return FleetSizing(n, met, result, judged, tuple(tried))
