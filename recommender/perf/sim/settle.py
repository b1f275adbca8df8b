"""Simulations that reach steady state: as many requests as the load needs, the warm-up dropped, P99s checked.

A fixed 600 requests is too few once a replica holds a thousand in flight: the batch is still filling when
the run ends, and the P99s are those of the warm-up. So the simulated count follows from Little's law: at
rate λ with requests of W seconds, L = λ·W are in flight; the run drops its first max(10 %, L) requests
(the batch filling from empty) and keeps ``MEASURED_PER_IN_FLIGHT`` x L after them (at least
``MIN_MEASURED``). Then it checks itself: another run with twice the requests must move neither P99 (TTFT,
TPOT) by more than ``TOLERANCE``, else the count doubles again (up to ``MAX_REQUESTS``). The result says
how many requests its P99s rest on and whether they settled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.sim.results import WARMUP_FRACTION, Percentiles

if TYPE_CHECKING:
    from recommender.perf.sim.results import SimulationResult

__all__ = ["MAX_REQUESTS", "TOLERANCE", "Settled", "requests_for", "settle"]

#: Another block of requests moving a P99 by less than this (relative) is settled.
TOLERANCE = 0.05
#: Requests measured after the warm-up, per request in flight, and at least this many.
MEASURED_PER_IN_FLIGHT = 4
MIN_MEASURED = 540
#: The most requests one simulation takes (the simulator does 10,000 in well under a second).
MAX_REQUESTS = 40_000


@dataclass(frozen=True, slots=True)
class Settled:
    """A simulation at steady state: its P99s over `measured` requests after `warmup`, and how far the last
    doubling moved them (`moved`, relative; `settled` when under `TOLERANCE`)."""

    result: SimulationResult
    requests: int
    warmup: int
    moved: float
    settled: bool

    @property
    def measured(self) -> int:
        return self.requests - self.warmup

    def describe(self) -> str:
        state = f"settled within {TOLERANCE:.0%}" if self.settled else f"still moving {self.moved:.0%} at the cap"
        return f"P99s over {self.measured:,} requests after a warm-up of {self.warmup:,} ({state} when doubled)"


def warmup_of(requests: int, in_flight: float) -> int:
    """Requests dropped from the front: the batch filling from empty (at least the requests in flight)."""
    return min(requests - 1, max(int(requests * WARMUP_FRACTION), math.ceil(in_flight)))


def requests_for(in_flight: float) -> int:
    """Requests to simulate with `in_flight` requests at once (Little's law): the warm-up, then the measured ones."""
    measured = max(MIN_MEASURED, math.ceil(MEASURED_PER_IN_FLIGHT * in_flight))
    return min(MAX_REQUESTS, max(math.ceil(in_flight) + measured, math.ceil(measured / (1 - WARMUP_FRACTION))))


def _in_flight(result: SimulationResult, rate: float) -> float:
    """Little's law from a run: the arrival rate times the mean time a request spends in the system."""
    e2e = result.e2e_s[~np.isnan(result.e2e_s)]
    return rate * float(e2e.mean()) if e2e.size else 0.0


def _rewarmed(result: SimulationResult, warmup: int) -> SimulationResult:
    """`result` with its percentiles over the requests after `warmup`."""
    return replace(
        result,
        ttft_ms=Percentiles.of(result.ttft_s[warmup:]),
        tpot_ms=Percentiles.of(result.tpot_s[warmup:]),
        e2e_ms=Percentiles.of(result.e2e_s[warmup:]),
    )


def _moved(a: SimulationResult, b: SimulationResult) -> float:
    """The largest relative change between two runs' P99 TTFT and P99 TPOT (NaN TPOTs, one-token outputs, aside)."""
    pairs = [(a.ttft_ms.p99, b.ttft_ms.p99), (a.tpot_ms.p99, b.tpot_ms.p99)]
    return max((abs(y - x) / x for x, y in pairs if x > 0 and math.isfinite(x) and math.isfinite(y)), default=0.0)


def settle(run: Callable[[int], SimulationResult], rate: float, first: int = MIN_MEASURED * 10 // 9) -> Settled:
    """Simulate `run(n)` (the same requests' first n at `rate`) until doubling n moves the P99s < `TOLERANCE`."""
    probe = run(first)
    n = max(first, requests_for(_in_flight(probe, rate)))
    current, moved = (probe if n == first else run(n)), math.inf
    while True:
        warm = warmup_of(n, _in_flight(current, rate))
        current = _rewarmed(current, warm)
        if 2 * n > MAX_REQUESTS:
            return Settled(current, n, warm, moved, False)
        doubled = run(2 * n)
        warm2 = warmup_of(2 * n, _in_flight(doubled, rate))
        doubled = _rewarmed(doubled, warm2)
        moved = _moved(current, doubled)
        if moved < TOLERANCE:
            return Settled(doubled, 2 * n, warm2, moved, True)
        current, n = doubled, 2 * n
