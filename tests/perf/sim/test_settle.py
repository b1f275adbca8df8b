"""Simulations that settle: Little's-law request counts, a dropped warm-up, overload refused, P99s checked."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.capacity import max_rate_within_sla
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.settle import (
    TOLERANCE,
    _judged,
    in_flight,
    requests_for,
    settle,
    steady,
    warmup_of,
)
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
        return simulate(
            COST,
            make_workload(prompt=PROMPT, output=OUTPUT, n_requests=n, rate=rate),
            CONFIG,
        )

    return run


def test_the_request_count_follows_the_requests_in_flight() -> None:
    assert requests_for(10) == 600 + 10 and requests_for(1500) == 1500 + 6000 + 1500  # warm-up, measured, drain
    assert warmup_of(600, 10) == 60 and warmup_of(7500, 1500) == 1500  # at least the batch filling from empty


def test_p99s_settle_and_stay_within_the_tolerance_when_the_count_doubles() -> None:
    run = _runner(30.0)  # ~400 requests in flight
    settled = settle(run, 30.0)
    assert settled.settled and not settled.overloaded and settled.moved is not None and settled.moved < TOLERANCE
    assert in_flight(settled.result, 30.0) > 300 and settled.measured >= 4 * 300
    # The same traffic, twice the requests, the same warm-up rule: the P99s hold within the tolerance.
    doubled = _judged(run(2 * settled.requests), 2 * settled.requests, 30.0)
    for a, b in (
        (settled.result.ttft_ms.p99, doubled.result.ttft_ms.p99),
        (settled.result.tpot_ms.p99, doubled.result.tpot_ms.p99),
    ):
        assert b == pytest.approx(a, rel=TOLERANCE)
    described = settled.describe()
    assert described.endswith("settled within 5% when doubled") and f"{settled.measured:,} requests" in described


def test_an_overloaded_rate_is_called_overloaded_where_600_requests_looked_fine() -> None:
    """At 40 req/s the queue grows without bound; 600 requests end before it shows (P99 TTFT ~25 ms)."""
    run = _runner(40.0)
    assert run(600).ttft_ms.p99 < 100
    judged = steady(run, 40.0)
    assert judged.overloaded and judged.requests > 600 and "overloaded: completions" in judged.describe()
    assert settle(run, 40.0, judged) is judged  # no count settles a growing queue: not doubled


def test_the_rate_search_refuses_overloaded_rates_that_600_requests_called_within_the_sla(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """600-request runs meet P99 TTFT <= 1 s up to the decode-only ceiling (~39 req/s: the old search's answer);
    at steady state the queue grows well below it, so the capacity is lower, and its P99s say what they rest on.
    The bisection's probes are the first run alone (600 requests); only its answer runs to steady state, and an
    answer refused there steps down to the rate its completions kept up with."""
    import recommender.perf.sim.capacity as capacity

    counts: list[int] = []
    real = capacity.simulate

    def counted(cost, workload, config, speculation=None):  # type: ignore[no-untyped-def]
        counts.append(len(workload.prompt_tokens))
        return real(cost, workload, config, speculation=speculation)

    assert _runner(40.0)(600).meets(ttft_p99_ms=1000.0, tpot_p99_ms=100.0)
    monkeypatch.setattr(capacity, "simulate", counted)
    search = max_rate_within_sla(
        COST,
        CONFIG,
        prompt=PROMPT,
        output=OUTPUT,
        ttft_p99_ms=1000.0,
        tpot_p99_ms=100.0,
    )
    assert search.settled is not None and not search.settled.overloaded and search.result is search.settled.result
    assert 25.0 <= search.rate_per_s < 37.0 and search.settled.measured > 4 * 1000  # over a thousand in flight
    assert search.result.meets(ttft_p99_ms=1000.0, tpot_p99_ms=100.0)
    assert "req/s" in search.limit and f"{search.settled.measured:,} requests" in search.settled.describe()
    # Here 600 requests meet the SLA at the decode-only ceiling (~39 req/s), so the probes end there: the ceiling's
    # steady run finds it overloaded, the search steps down to what its completions kept up with, and bisects back
    # up from there with steady-state probes.
    probes = counts[: counts.index(next(n for n in counts if n != 600))]
    assert len(probes) >= 2 and set(probes) == {600}
    assert search.settled.requests in counts[len(probes) :] and search.settled.requests > 4 * 600  # a steady run's
    assert search.rate_per_s < 37.0


@pytest.mark.slow
def test_with_no_step_down_the_search_falls_back_to_steady_state_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the steps down do not mend what the short probes got wrong, the bisection goes on below the refused
    answer with steady-state probes: the same overloaded ceiling refused, a capacity that holds at steady state."""
    import recommender.perf.sim.capacity as capacity

    monkeypatch.setattr(capacity, "STEP_DOWNS", 0)
    search = max_rate_within_sla(
        COST,
        CONFIG,
        prompt=PROMPT,
        output=OUTPUT,
        ttft_p99_ms=1000.0,
        tpot_p99_ms=100.0,
    )
    assert search.settled is not None and not search.settled.overloaded and search.result is search.settled.result
    assert 25.0 <= search.rate_per_s < 37.0 and search.result.meets(ttft_p99_ms=1000.0, tpot_p99_ms=100.0)
