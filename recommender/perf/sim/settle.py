"""Simulations that reach steady state: as many requests as the load needs, the warm-up dropped, P99s checked.

A fixed 600 requests is too few once a replica holds a thousand in flight: the batch is still filling when
the run ends, and the P99s are those of the warm-up. So the simulated count follows from Little's law: at
rate λ with requests of W seconds, L = λ·W are in flight; the run drops its first max(10 %, L) requests
(the batch filling from empty), keeps ``MEASURED_PER_IN_FLIGHT`` x L after them (at least
``MIN_MEASURED``) and drops the last L (served while the run drains, in a shrinking batch). W is predicted
by a run itself: a first run's mean request time gives L, and the run
grows until it holds the count its own L asks for (``steady``).

An overloaded rate (above what the replica completes) has no steady state: its queue grows for as long as
the run lasts, so a finite run's P99 understates what the traffic would see. ``steady`` measures the
backlog, the requests in the system at the last arrival less those half-way through the run (past the
warm-up), over the arrivals in between: completions keeping up leave it near 0. A backlog over ``OVERLOAD``
of the arrivals (completions per second that far below arrivals) while the time to first token climbs
across the run (a queue, not a batch still filling) is an overloaded rate, whatever its P99s.

``settle`` then checks the P99s: the same traffic with twice the requests must move neither P99 (TTFT, TPOT)
by more than ``TOLERANCE``, else the count doubles again (up to ``MAX_REQUESTS``, or
``AT_LOAD_MAX_REQUESTS`` for the P99s at the load of a configuration shown). A run's own halves are no
such check: a batch whose long requests take many request times to reach their share drifts slowly, and
two halves of a short run agree while a run twice as long does not. The result says how many
requests its P99s rest on and whether they settled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.sim.results import WARMUP_FRACTION

if TYPE_CHECKING:
    from recommender.perf.sim.results import SimulationResult

__all__ = [
    "AT_LOAD_MAX_REQUESTS",
    "MAX_REQUESTS",
    "OVERLOAD",
    "TOLERANCE",
    "Settled",
    "is_steady",
    "probe",
    "requests_for",
    "settle",
    "steady",
]

#: Another block of requests moving a P99 by less than this (relative) is settled.
TOLERANCE = 0.05
#: A backlog growing by more than this fraction of the measured arrivals is an overloaded rate.
OVERLOAD = 0.05
#: Requests measured after the warm-up, per request in flight, and at least this many.
MEASURED_PER_IN_FLIGHT = 4
MIN_MEASURED = 540
#: The first run's requests when nothing predicts the requests in flight (MIN_MEASURED after a 10 % warm-up).
FIRST_REQUESTS = 600
#: The most requests one simulation takes (a capacity search's probes and checks; the P99s a search ranks on).
MAX_REQUESTS = 40_000
#: The most requests the P99s at a replica's load may take to settle where they are shown (``settle``'s
#: `max_requests`: the search's winner and current deployment, `plan`'s rows): near its capacity a replica's queue
#: relaxes slowly, and one such run per configuration shown is affordable where every candidate's is not.
AT_LOAD_MAX_REQUESTS = 320_000
#: A run holding at least 1/GROW_SLACK of the count its own Little's law asks for is long enough.
GROW_SLACK = 1.25


@dataclass(frozen=True, slots=True)
class Settled:
    """A simulation at steady state: its P99s over the `requests` after `warmup`, the backlog growth over them
    (`backlog`, a fraction of their arrivals), and how far doubling the requests moved the P99s (`moved`,
    relative; None: not checked; `settled` when under `TOLERANCE`)."""

    result: SimulationResult
    requests: int
    warmup: int
    backlog: float
    #: Requests dropped from the end: the last to arrive are served while the run drains (no arrivals after
    #: them), so their batch shrinks and their latencies understate the steady state's.
    cooldown: int = 0
    #: Whether the queue still grows: completions per second more than `OVERLOAD` below arrivals while the
    #: waiting (TTFT) climbs, or still at ``MAX_REQUESTS`` (a backlog alone may be a batch still filling: a
    #: batch whose long requests take many request times to reach their share fills for ~10 x L requests).
    overloaded: bool = False
    moved: float | None = None
    settled: bool = False

    @property
    def measured(self) -> int:
        return self.requests - self.warmup - self.cooldown

    @property
    def end(self) -> int:
        """One past the last measured request."""
        return self.requests - self.cooldown

    def describe(self) -> str:
        """How many requests the P99s rest on and how they held ("2,400 requests, settled within 5%")."""
        if self.overloaded:
            state = f"overloaded: completions {self.backlog:.0%} below arrivals, the queue still growing"
        elif self.moved is None:
            state = "not checked"
        elif self.settled:
            state = f"settled within {TOLERANCE:.0%} when doubled"
        else:
            state = f"still moving {self.moved:.0%} at {self.requests:,} requests"
        dropped = f"{self.requests:,} less {self.warmup:,} warm-up, {self.cooldown:,} drain"
        return f"{self.measured:,} requests ({dropped}), {state}"


def warmup_of(requests: int, in_flight: float) -> int:
    """Requests dropped from the front: the batch filling from empty (at least the requests in flight)."""
    return min(requests - 1, max(int(requests * WARMUP_FRACTION), math.ceil(in_flight)))


def cooldown_of(requests: int, warmup: int, in_flight: float) -> int:
    """Requests dropped from the end: those served while the run drains (the last requests in flight), leaving
    at least half the requests after the warm-up measured."""
    return min(math.ceil(in_flight), (requests - warmup) // 2)


def requests_for(in_flight: float) -> int:
    """Requests to simulate with `in_flight` requests at once (Little's law): the warm-up, the measured ones, and
    the drain."""
    measured = max(MIN_MEASURED, math.ceil(MEASURED_PER_IN_FLIGHT * in_flight))
    warm_and_measured = max(math.ceil(in_flight) + measured, math.ceil(measured / (1 - WARMUP_FRACTION)))
    return min(MAX_REQUESTS, warm_and_measured + math.ceil(in_flight))


def in_flight(result: SimulationResult, rate: float) -> float:
    """Little's law from a run: the arrival rate times the mean time a request spends in the system, over the
    later half of the run (the system filling from empty shortens the first requests' times)."""
    e2e = result.e2e_s[len(result.e2e_s) // 2 :]
    e2e = e2e[~np.isnan(e2e)]
    return rate * float(e2e.mean()) if e2e.size else 0.0


def backlog_growth(result: SimulationResult, start: int) -> float:
    """How much the requests in the system grew from arrival `start` to the last arrival, over the arrivals in
    between: about 0 when completions keep up with arrivals, 1 - completed/arrived per second when they do not."""
    arrivals = result.arrivals_s
    if arrivals is None or len(arrivals) - start < 2:
        return 0.0
    finishes = arrivals + result.e2e_s
    first, last = float(arrivals[start]), float(arrivals[-1])
    # Finishes by each time, counted (what a sort and a right-side search would find, in one pass each).
    in_system_first = start + 1 - int(np.count_nonzero(finishes <= first))
    in_system_last = len(arrivals) - int(np.count_nonzero(finishes <= last))
    return (in_system_last - in_system_first) / (len(arrivals) - start - 1)


def _waiting_grows(result: SimulationResult) -> bool:
    """Whether the time to first token climbs across the run, as a queue that grows makes it: the last quarter's
    mean over twice the second quarter's, and by more than a tenth of a request's time in the system. (A batch
    still filling slows its steps, so TTFT rises too, but by a step's time, not by a queue's.)"""
    quarter = len(result.ttft_s) // 4
    second, last = result.ttft_s[quarter : 2 * quarter], result.ttft_s[3 * quarter :]
    request_s = float(np.nanmean(result.e2e_s[2 * quarter :]))
    early, late = float(np.nanmean(second)), float(np.nanmean(last))
    return late > 2 * early and late - early > 0.1 * request_s


def _measured(result: SimulationResult, start: int, end: int) -> SimulationResult:
    """`result` with its percentiles over the requests from `start` to `end` (arrival order)."""
    return replace(result, window=(start, end))


def _moved(a: SimulationResult, b: SimulationResult) -> float:
    """The largest relative change between two runs' P99 TTFT and P99 TPOT (NaN TPOTs, one-token outputs, aside)."""
    pairs = [(a.ttft_ms.p99, b.ttft_ms.p99), (a.tpot_ms.p99, b.tpot_ms.p99)]
    return max(
        (abs(y - x) / x for x, y in pairs if x > 0 and math.isfinite(x) and math.isfinite(y)),
        default=0.0,
    )


def _judged(result: SimulationResult, n: int, rate: float) -> Settled:
    """`result`'s P99s between its warm-up and its drain; its backlog over the later half."""
    flight = in_flight(result, rate)
    warm = warmup_of(n, flight)
    cool = cooldown_of(n, warm, flight)
    backlog = backlog_growth(result, n // 2)
    overloaded = backlog > OVERLOAD and (n >= MAX_REQUESTS or _waiting_grows(result))
    return Settled(_measured(result, warm, n - cool), n, warm, backlog, cool, overloaded)


def probe(run: Callable[[int], SimulationResult], rate: float, n: int) -> Settled:
    """One run of `n` requests at `rate`, judged like a steady one (warm-up and drain dropped, its backlog's growth
    while the TTFT climbs called overloaded) but not grown: the capacity search's cheap probe, whose answer alone is
    then run to steady state (``capacity.py``)."""
    return _judged(run(n), n, rate)


def is_steady(run: Settled, rate: float) -> bool:
    """Whether `run` already holds the count its own requests in flight ask for, its backlog flat: ``steady`` would
    stop at it (a short probe at a light load is its own steady run)."""
    wanted = requests_for(in_flight(run.result, rate))
    return not run.overloaded and run.backlog <= OVERLOAD and wanted <= GROW_SLACK * run.requests


def steady(
    run: Callable[[int], SimulationResult],
    rate: float,
    expected_in_flight: float = 0.0,
    first: int = FIRST_REQUESTS,
    decided: Callable[[Settled], bool] | None = None,
) -> Settled:
    """One run of `run(n)` (the same requests' first n at `rate`) long enough for its own Little's law: from
    the count `expected_in_flight` asks for (at least `first`), grown while the run's requests in
    flight ask for more than ``GROW_SLACK`` times its count, and doubled while its backlog grows with no queue
    climbing (a batch still filling), until it is seen overloaded (longer runs only grow its queue). Its P99s
    are over the requests between the warm-up and the drain, its backlog says whether the rate is overloaded;
    the P99s are not yet checked by doubling (``settle``). `decided` stops the growth early where a shorter run
    already answers the caller (a capacity probe whose P99 already breaks the SLA: a longer run, its batch fuller,
    only raises it)."""
    n = min(MAX_REQUESTS, max(first, requests_for(expected_in_flight)))
    while True:
        result = run(n)
        judged = _judged(result, n, rate)
        wanted = requests_for(in_flight(result, rate))
        filling = judged.backlog > OVERLOAD  # with no queue climbing yet: the batch still filling, its steps slowing
        if (
            n >= MAX_REQUESTS
            or judged.overloaded
            or (wanted <= GROW_SLACK * n and not filling)
            or (decided is not None and decided(judged))
        ):
            return judged
        n = min(MAX_REQUESTS, max(wanted, 2 * n if filling else math.ceil(GROW_SLACK * n)))


def settle(
    run: Callable[[int], SimulationResult],
    rate: float,
    start: Settled | None = None,
    doublings: int | None = None,
    max_requests: int = MAX_REQUESTS,
) -> Settled:
    """`steady` (or `start`, a steady run already made at `rate`), then the same traffic with twice the requests,
    doubling until its P99s move by less than ``TOLERANCE`` (settled: the doubled run is returned, its P99s over
    more requests) or the count would pass `max_requests` (not settled). An overloaded run is returned as it
    is: its P99s grow with the run, and no count settles them. `doublings` caps the doublings (a check that the
    P99s hold at twice the requests, not that they settle)."""
    current = start if start is not None else steady(run, rate)
    if current.settled:
        return current
    left = math.inf if doublings is None else doublings
    while not current.overloaded and left > 0:
        n, left = 2 * current.requests, left - 1
        if n > max_requests:
            return current
        doubled = _judged(run(n), n, rate)
        moved = _moved(current.result, doubled.result)
        current = replace(doubled, moved=moved, settled=moved < TOLERANCE and not doubled.overloaded)
        if current.settled:
            return current
    return current
