"""A fleet of identical replicas behind a router: the workload split by the routing policy, each replica simulated
with its own prefix cache, the requests put back together.

A plan that simulates one replica lets its cache see every turn of every conversation; behind a round-robin load
balancer turn j lands on any of N replicas and finds its history only where turn j-1 went. Here each replica runs
the single-replica simulation (``simulate.py``) on the requests the router (``routing.py``) sent it, so its cache
holds only those; the fleet's P99s are over all requests and its hit rate is every replica's hits over every
replica's prompt tokens. One replica is exactly the single-replica simulation.

The replicas are simulated apart: the router decides before them, from its own record of what it sent (its
prefix index) and, for the policies that read load, its in-flight counts from the completions of the previous
pass (``Router.route``). With `passes` 2 the first pass counts requests sent, the second counts the first pass's
completions; ``FleetResult.settled`` says whether the last routing repeated the one before (a fixed point of
routing and completions), which is what a router deciding as the requests arrive would see. The load-aware policy
reads each replica's queue and KV usage at the arrival, so its replicas are replayed together up to each arrival
(``fleet_live.py``): one pass, settled by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.sim.fleet_live import replay_routed, subset
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.simulate import simulate

if TYPE_CHECKING:
    from recommender.perf.sim.routing import Router
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.workload import FloatArray, IntArray, Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["FleetResult", "simulate_fleet", "split"]


@dataclass(frozen=True)
class FleetResult:
    """A fleet's run: the merged result over every request, each replica's own (None: it got no request), and
    which replica served each request (arrival order)."""

    fleet: SimulationResult
    replicas: tuple[SimulationResult | None, ...]
    assignment: IntArray
    #: Routings simulated; and whether the last routing equalled the one before (always, for policies that do
    #: not read load).
    passes: int
    settled: bool

    @property
    def requests_per_replica(self) -> tuple[int, ...]:
        return tuple(np.bincount(self.assignment, minlength=len(self.replicas)).tolist())

    @property
    def prefix_hit_rate(self) -> float:
        """Prompt tokens served from the replicas' caches over all prompt tokens."""
        return self.fleet.prefix_hit_rate

    @property
    def replica_hit_rates(self) -> tuple[float | None, ...]:
        return tuple(None if r is None else r.prefix_hit_rate for r in self.replicas)


def split(assignment: IntArray, replicas: int) -> list[IntArray]:
    """The requests (indices in arrival order) each replica is sent, by the replica `assignment` gives each."""
    order = np.argsort(assignment, kind="stable")
    bounds = np.searchsorted(assignment[order], np.arange(replicas + 1))
    return [order[bounds[r] : bounds[r + 1]] for r in range(replicas)]


def simulate_fleet(
    cost: StepCostModel,
    workload: Workload,
    config: SchedulerConfig,
    *,
    replicas: int,
    router: Router,
    passes: int = 2,
    ttft_sla_ms: float | None = None,
    tpot_sla_ms: float | None = None,
    speculation: SpeculativeDecoding | None = None,
) -> FleetResult:
    """Serve `workload` on `replicas` replicas of `config` behind `router`; each replica as ``simulate`` does.

    A policy that reads the replicas' own state (``load-aware``) is routed once, as they run (``fleet_live.py``); one
    that reads the router's in-flight counts up to `passes` times, each after the previous pass's completions; the
    others once.
    """
    if passes < 1:
        raise ValueError(f"need at least one pass, got {passes}")
    if router.live and replicas > 1:
        assignment, runs = replay_routed(
            cost,
            workload,
            config,
            replicas=replicas,
            router=router,
            ttft_sla_ms=ttft_sla_ms,
            tpot_sla_ms=tpot_sla_ms,
            speculation=speculation,
        )
        merged = _merge(workload, split(assignment, replicas), runs, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
        return FleetResult(merged, runs, assignment, 1, settled=True)
    finish: FloatArray | None = None
    previous: IntArray | None = None
    result: FleetResult | None = None
    for done in range(1, (passes if router.reads_load and replicas > 1 else 1) + 1):
        assignment = router.route(workload, replicas, finish_s=finish, replica_blocks=config.kv_blocks)
        if result is not None and previous is not None and np.array_equal(assignment, previous):
            return replace(result, settled=True)
        parts = split(assignment, replicas)
        runs = tuple(
            simulate(
                cost,
                subset(workload, idx),
                config,
                ttft_sla_ms=ttft_sla_ms,
                tpot_sla_ms=tpot_sla_ms,
                speculation=speculation,
            )
            if len(idx)
            else None
            for idx in parts
        )
        fleet = _merge(workload, parts, runs, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
        result = FleetResult(fleet, runs, assignment, done, settled=not router.reads_load or replicas == 1)
        previous, finish = assignment, workload.arrivals_s + fleet.e2e_s
    assert result is not None
    return result


def _merge(
    workload: Workload,
    parts: list[IntArray],
    runs: tuple[SimulationResult | None, ...],
    *,
    ttft_sla_ms: float | None,
    tpot_sla_ms: float | None,
) -> SimulationResult:
    """One result over every request, in `workload`'s order: latencies put back where each request was, counts
    summed, the duration from the fleet's first arrival to its last finish."""
    n = len(workload)
    ttft, tpot, e2e = np.empty(n), np.empty(n), np.empty(n)
    start = workload.arrivals_s[0]
    duration = 0.0
    for idx, run in zip(parts, runs, strict=True):
        if run is None:
            continue
        ttft[idx], tpot[idx], e2e[idx] = run.ttft_s, run.tpot_s, run.e2e_s
        duration = max(duration, run.duration_s + float(workload.arrivals_s[idx[0]] - start))
    done = [r for r in runs if r is not None]
    return SimulationResult.of_latencies(
        workload,
        ttft,
        tpot,
        e2e,
        duration_s=duration,
        preemptions=sum(r.preemptions for r in done),
        steps=sum(r.steps for r in done),
        max_step_tokens=max(r.max_step_tokens for r in done),
        ttft_sla_ms=ttft_sla_ms,
        tpot_sla_ms=tpot_sla_ms,
        prefix_hit_tokens=sum(r.prefix_hit_tokens for r in done),
        prefill_tokens=sum(r.prefill_tokens for r in done),
    )
