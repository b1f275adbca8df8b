"""From step times to what a user sees: P99 TTFT, P99 TPOT and the capacity of one replica.

The continuous-batching simulator replays the user's traffic (Poisson, a daily profile's lengths, a
trace) through an engine's scheduler on a step-cost model — calibrated per engine for catalog GPUs
(``calibrated.py``), measured probe tables for the local device; the capacity is the highest arrival
rate whose P99 TTFT and TPOT meet the SLA, and the latencies are the P99s at the load each replica
carries at the target traffic. On a calibrated GPU the SLA is checked on the same traffic simulated
with every step at the upper bound of its held-out error (``simulate_serving_interval``).

The capacity is a property of the configuration, never of the traffic asked about: where a configuration shown
has P99s that do not settle at the search's answer, the capacity steps down a ladder fixed by that answer
(``RUNG_FACTOR`` a rung) to the first rate whose P99s settle, whatever the target; the target rate sets the
replicas, ceil(target / capacity), and the load per replica the P99s are reported at.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.perf.sim.capacity import RateSearch, max_rate_within_sla, replicas_needed
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving_estimate import (
    LatencyLimits as LatencyLimits,  # re-exported: its users import it here
)
from recommender.perf.sim.serving_estimate import ServingEstimate as ServingEstimate  # re-exported
from recommender.perf.sim.settle import (
    FIRST_REQUESTS,
    MAX_REQUESTS,
    Settled,
    in_flight,
    probe,
    settle,
    steady,
)
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.speculative import SpeculativeStepCost
from recommender.perf.sim.traffic_load import TrafficLoad as TrafficLoad  # re-exported: its users import it here
from recommender.perf.sim.workload import make_workload
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.perf.sim.results import SimulationResult
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.step.cost import StepCostModel


#: Requests of a simulation's first run, where nothing predicts more: it then grows to the count its own requests
#: in flight ask for and doubles until its P99s settle (``settle.py``).
SIMULATED_REQUESTS = FIRST_REQUESTS


#: A shown configuration whose P99s at the capacity search's answer do not settle steps its capacity down this
#: factor at a time (``_settled_capacity``): rungs fixed by the answer alone, never by the traffic asked about.
RUNG_FACTOR = 0.95
#: The most rungs below the search's answer (0.95**6: 74 % of it).
CAPACITY_RUNGS = 6


def simulate_serving(
    cost: StepCostModel,
    config: SchedulerConfig,
    *,
    traffic: TrafficLoad,
    sla: LatencyLimits,
    speculation: SpeculativeDecoding | None = None,
    settle_within: int = MAX_REQUESTS,
) -> ServingEstimate:
    """Capacity within the SLA and the latency percentiles at the target load per replica, from simulation
    (with `speculation`: decode steps verify drafts at the measured acceptance, ``speculative.py``). The P99s at
    the load settle (``settled_at``) within `settle_within` requests (``settle.AT_LOAD_MAX_REQUESTS`` for a
    configuration shown); with 0 they are one first run's, not checked (a caller that compares capacities alone and
    settles only the configurations it shows: ``fleet/plan.py``). The capacity never depends on the target rate:
    it is the capacity search's answer, or, for a configuration shown (`settle_within` over ``settle.MAX_REQUESTS``)
    whose P99s at that answer do not settle, the first rate of a fixed ladder down from it whose P99s do
    (``_settled_capacity``), and the provenance says so; the target sets only the replicas and the load the P99s are
    reported at, settled or not."""
    label = (cost if speculation is None else SpeculativeStepCost(cost, speculation)).provenance.extended(
        f"continuous-batching simulation (Poisson requests to steady state, max_num_seqs {config.max_num_seqs}, "
        f"{config.max_num_batched_tokens} tokens per simulated step, chunked prefill)"
    )
    # Fixed lengths for a constant rate; a profile's lognormal lengths or its trace's histogram.
    prompt, output = traffic.prompt, traffic.output
    search = max_rate_within_sla(
        cost,
        config,
        prompt=prompt,
        output=output,
        ttft_p99_ms=sla.ttft_p99_ms,
        tpot_p99_ms=sla.tpot_p99_ms,
        n_requests=SIMULATED_REQUESTS,
        speculation=speculation,
        **traffic.sharing,
    )
    if search.rate_per_s <= 0:
        return _lone_request(cost, config, traffic, speculation, label)
    capacity, load, settled, lowered, capacity_settled = _replica_load(
        cost, config, traffic, search, speculation, settle_within
    )
    at_load = settled.result
    return ServingEstimate(
        ttft_ms=at_load.ttft_ms,
        tpot_ms=at_load.tpot_ms,
        requests_per_s=capacity,
        tokens_per_s=capacity * (traffic.prompt_tokens + traffic.output_tokens),
        load_per_replica_rps=load,
        provenance=label.extended(
            f"P99s at the load: {settled.describe()}; capacity: {search.limit or 'the ceiling'}" + lowered
        ),
        prefix_hit_rate=at_load.prefix_hit_rate if traffic.shares_prompts else None,
        requests_measured=settled.measured,
        p99s_settled=settled.settled,
        requests_simulated=settled.requests,
        capacity_settled=capacity_settled,
    )


def _lone_request(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    speculation: SpeculativeDecoding | None,
    label: Provenance,
) -> ServingEstimate:
    """Not even a lone request meets the SLA: the latencies at a trickle of traffic, at the mean lengths (a drawn
    tail may hold a request that never fits: then the capacity is 0 for that)."""
    lone = simulate(
        cost,
        make_workload(prompt=traffic.prompt_tokens, output=traffic.output_tokens, n_requests=20, rate=1e-3),
        config,
        speculation=speculation,
    )
    return ServingEstimate(lone.ttft_ms, lone.tpot_ms, 0.0, 0.0, 1e-3, label)


def _at_load(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    load: float,
    search: RateSearch,
    speculation: SpeculativeDecoding | None,
    settle_within: int,
) -> Settled:
    """The run behind the P99s at a replica's `load`: the capacity's own run where the load is the capacity, one
    first run where nothing asks them settled (`settle_within` 0), else a steady run settled by doubling within
    `settle_within` requests."""
    assert search.settled is not None and search.result is not None  # a capacity above 0 was simulated to settle
    if load == search.rate_per_s:  # the capacity's own run, doubled once there: settled the rest of the way
        return settle(
            _runner(cost, config, traffic, load, speculation),
            load,
            search.settled,
            doublings=None if settle_within else 0,
            max_requests=settle_within,
        )
    if not settle_within:
        return probe(_runner(cost, config, traffic, load, speculation), load, FIRST_REQUESTS)
    # From half the requests the capacity's check ended on: at a lower load, its P99s move no more.
    return settled_at(
        cost,
        config,
        traffic,
        load,
        speculation,
        request_s=in_flight(search.result, search.rate_per_s) / search.rate_per_s,
        first=max(FIRST_REQUESTS, search.settled.requests // 2),
        max_requests=settle_within,
    )


def _replica_load(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    search: RateSearch,
    speculation: SpeculativeDecoding | None,
    settle_within: int,
) -> tuple[float, float, Settled, str, bool]:
    """The capacity, the load per replica at the replicas it needs, the run behind the P99s there (``_at_load``),
    a clause for the provenance where a shown configuration's capacity was lowered (``_settled_capacity``), and
    whether the P99s at the capacity itself settled. The capacity never depends on the target rate: only the
    replicas, and so the load the P99s are reported at, do."""
    shown = settle_within > MAX_REQUESTS  # only a configuration shown must settle; elsewhere the search's answer holds
    if shown:
        capacity, at_capacity, lowered = _settled_capacity(cost, config, traffic, search, speculation, settle_within)
    else:
        assert search.settled is not None  # a capacity above 0 was simulated to settle
        capacity, at_capacity, lowered = search.rate_per_s, search.settled, ""
    replicas = replicas_needed(traffic.requests_per_second, capacity)
    load = traffic.requests_per_second / replicas
    if shown and load == capacity:  # the capacity's own run, settled as far as it goes already
        return capacity, load, at_capacity, lowered, at_capacity.settled
    settled = _at_load(cost, config, traffic, load, search, speculation, settle_within)
    return capacity, load, settled, lowered, at_capacity.settled


def _settled_capacity(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    search: RateSearch,
    speculation: SpeculativeDecoding | None,
    settle_within: int,
) -> tuple[float, Settled, str]:
    """A shown configuration's capacity: the first rate of the ladder down from the capacity search's answer
    (``RUNG_FACTOR`` a rung, at most ``CAPACITY_RUNGS`` rungs) whose P99s settle within `settle_within` requests,
    its run, and a clause saying why where it is below the answer (the answer kept, and said to be, where none
    settles). The answer's own rung continues its check's run (``_at_load``): no simulation where that settled.

    The capacity search judges rates on runs of at most ``settle.MAX_REQUESTS`` requests; a rate whose P99s still
    move (or whose queue still grows) after `settle_within` is that close to the knee that the longer runs are the
    better evidence. The rungs depend on the answer alone, and the same requests are replayed on each, so every
    target rate asked about the configuration gets the same capacity; settling is not monotone in the rate (a rung
    may settle where a higher one between rungs would not), which is why no rate between them is tried.
    """
    answer = search.rate_per_s
    first: Settled | None = None
    for rung in range(CAPACITY_RUNGS + 1):
        rate = answer * RUNG_FACTOR**rung
        run = _at_load(cost, config, traffic, rate, search, speculation, settle_within)
        if run.settled:
            if first is None:
                return rate, run, ""
            return (
                rate,
                run,
                f"; capacity lowered from {answer:.3g} to {rate:.3g} req/s per replica (the first rate, "
                f"{RUNG_FACTOR:g}x a rung down, whose P99s settle within {settle_within:,} requests): at "
                f"{answer:.3g} req/s the P99s were {first.describe()}",
            )
        if first is None:
            first = run
    assert first is not None
    lowest = answer * RUNG_FACTOR**CAPACITY_RUNGS
    return (
        answer,
        first,
        f"; capacity kept: the P99s settle within {settle_within:,} requests at no rate from {answer:.3g} down to "
        f"{lowest:.3g} req/s ({RUNG_FACTOR:g}x a rung; at {answer:.3g} req/s {first.describe()})",
    )


def settled_at(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    rate: float,
    speculation: SpeculativeDecoding | None,
    *,
    request_s: float = 0.0,
    first: int = FIRST_REQUESTS,
    max_requests: int = MAX_REQUESTS,
) -> Settled:
    """The traffic simulated at `rate` until its P99s settle (``settle.py``): the same requests, more of them; the
    first run of at least `first` requests, sized for `rate` x `request_s` in flight (the request time at the
    capacity, an upper bound at a lower rate), grown to its own steady state, then doubled until its P99s move
    by under ``settle.TOLERANCE`` or the count would pass `max_requests`."""
    run = _runner(cost, config, traffic, rate, speculation)
    return settle(run, rate, steady(run, rate, rate * request_s, first=first), max_requests=max_requests)


def _runner(
    cost: StepCostModel,
    config: SchedulerConfig,
    traffic: TrafficLoad,
    rate: float,
    speculation: SpeculativeDecoding | None,
) -> Callable[[int], SimulationResult]:
    """The traffic's first n requests at `rate`, simulated."""

    def run(n: int) -> SimulationResult:
        workload = make_workload(
            prompt=traffic.prompt, output=traffic.output, n_requests=n, rate=rate, **traffic.sharing
        )
        return simulate(cost, workload, config, speculation=speculation)

    return run


def simulate_serving_interval(
    point: StepCostModel,
    upper: StepCostModel,
    config: SchedulerConfig,
    *,
    traffic: TrafficLoad,
    sla: LatencyLimits,
    engine: str,
    confidence: float,
    ttft_offset_ms: float = 0.0,
    speculation: SpeculativeDecoding | None = None,
    settle_within: int = MAX_REQUESTS,
) -> ServingEstimate:
    """Capacity within `sla` and the P99s' upper ends from the user's traffic simulated with every step at the upper
    end of its interval (`upper`); the point P99s at the same load from the point step costs (`point`).

    `ttft_offset_ms` is the fixed time every TTFT carries outside the steps (the request's way through the
    engine); `sla`'s TTFT is the user's less that offset, and the reported TTFTs include it. `settle_within`
    is ``simulate_serving``'s, for both.
    """
    high = simulate_serving(
        upper, config, traffic=traffic, sla=sla, speculation=speculation, settle_within=settle_within
    )
    settled: Settled | None = None
    if high.requests_measured is not None and not settle_within:
        load = high.load_per_replica_rps
        settled = probe(_runner(point, config, traffic, load, speculation), load, FIRST_REQUESTS)
        at_load = settled.result
    elif high.requests_measured is None:
        workload = make_workload(
            prompt=traffic.prompt,
            output=traffic.output,
            n_requests=SIMULATED_REQUESTS,
            rate=high.load_per_replica_rps,
            **traffic.sharing,
        )
        at_load = simulate(point, workload, config, speculation=speculation)
    else:
        # The point steps are faster than the upper ones: their requests in flight at the load are no more, so half
        # the requests the upper ones settled on is a steady run for them, and its doubling the check.
        first = max(FIRST_REQUESTS, (high.requests_simulated or 0) // 2)
        settled = settled_at(
            point, config, traffic, high.load_per_replica_rps, speculation, first=first, max_requests=settle_within
        )
        at_load = settled.result
    t = at_load.ttft_ms
    return replace(
        high,
        ttft_ms=Percentiles(t.p50 + ttft_offset_ms, t.p95 + ttft_offset_ms, t.p99 + ttft_offset_ms),
        tpot_ms=at_load.tpot_ms,
        engine=engine,
        ttft_p99_high_ms=high.ttft_ms.p99 + ttft_offset_ms,
        tpot_p99_high_ms=high.tpot_ms.p99,
        confidence=confidence,
        prefix_hit_rate=at_load.prefix_hit_rate if traffic.shares_prompts else None,
        requests_measured=None if settled is None else settled.measured,
        requests_simulated=None if settled is None else settled.requests,
        p99s_settled=None if settled is None else settled.settled and high.p99s_settled,
    )
