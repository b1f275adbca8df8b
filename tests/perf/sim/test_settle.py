"""Simulations that settle: Little's-law request counts, a dropped warm-up, P99s checked by doubling."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.settle import TOLERANCE, _in_flight, requests_for, settle, warmup_of
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import LengthDist, make_workload
from recommender.perf.step.cost import RooflineStepCost
from recommender.quantize import get_scheme

_, LLAMA8 = load_architecture("llama-3.1-8b")
COST = RooflineStepCost(LLAMA8, get_scheme("fp8-dynamic"), load_catalog().get("b200"))
CONFIG = SchedulerConfig(kv_cache_tokens=4_000_000, max_num_seqs=2048, max_num_batched_tokens=8192)
PROMPT, OUTPUT = LengthDist(512, 0.5), LengthDist(1024, 0.5)


def _runner(rate: float):  # type: ignore[no-untyped-def]
    def run(n: int) -> SimulationResult:
        return simulate(COST, make_workload(prompt=PROMPT, output=OUTPUT, n_requests=n, rate=rate), CONFIG)

    return run


def test_the_request_count_follows_the_requests_in_flight() -> None:
    assert requests_for(10) == 600 and requests_for(1500) == 1500 + 6000
    assert warmup_of(600, 10) == 60 and warmup_of(7500, 1500) == 1500  # at least the batch filling from empty


def test_p99s_settle_and_stay_within_the_tolerance_when_the_count_doubles() -> None:
    run = _runner(30.0)  # ~400 requests in flight
    settled = settle(run, 30.0)
    assert settled.settled and settled.moved < TOLERANCE and settled.measured >= 4 * 400
    in_flight = _in_flight(settled.result, 30.0)
    assert in_flight > 300
    doubled = settle(lambda n: run(2 * n), 30.0)  # the same traffic, twice the requests at every step
    for a, b in (
        (settled.result.ttft_ms.p99, doubled.result.ttft_ms.p99),
        (settled.result.tpot_ms.p99, doubled.result.tpot_ms.p99),
    ):
        assert b == pytest.approx(a, rel=TOLERANCE)
    assert "P99s over" in settled.describe() and "settled within 5%" in settled.describe()


def test_an_overloaded_replica_is_not_called_settled_where_600_requests_looked_fine() -> None:
    """At 40 req/s the queue grows without bound; 600 requests end before it shows (P99 TTFT ~25 ms)."""
    run = _runner(40.0)
    assert run(600).ttft_ms.p99 < 100
    settled = settle(run, 40.0)
    assert not settled.settled and settled.result.ttft_ms.p99 > 10_000
