"""A mix of GPU types as a mixed-integer program: how many replicas of each pool, and who serves which lengths.

Requests are split into length buckets; one replica of pool p (a GPU type with a serving scheme)
carries at most ``capacity[b][p]`` requests/s of bucket b within the SLA (from the simulator).
Choose whole replica counts ``n_p`` and the share ``x[b][p]`` of bucket b routed to pool p to

    minimise   sum_p price_p * n_p
    subject to sum_p x[b][p] = 1                              (every request is served)
               sum_b x[b][p] * rate_b / capacity[b][p] <= n_p (no pool is loaded beyond its capacity)
               n_p integer >= 0, 0 <= x[b][p] <= 1, x[b][p] = 0 where capacity[b][p] = 0

solved by HiGHS through `scipy.optimize.milp` (the formulation of Mélange, Griggs et al. 2024).
The load constraint adds a replica's busy fractions over buckets: a replica given half its
capacity of short requests and half of long ones is full. That is the approximation here; the
simulator checked each bucket alone, not the blend on one replica.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

__all__ = [
    "MixProblem",
    "MixSolution",
    "SingleFleet",
    "best_single",
    "hourly_usd",
    "single_fleets",
    "solve_mix",
    "undominated",
]


@dataclass(frozen=True)
class MixProblem:
    """Rates per bucket (requests/s), capacities of one replica per [bucket][pool] (0: cannot), $/hour per replica."""

    bucket_rates: list[float]
    capacities: list[list[float]]
    prices: list[float]

    def __post_init__(self) -> None:
        if len(self.capacities) != len(self.bucket_rates) or any(len(c) != len(self.prices) for c in self.capacities):
            raise ValueError("capacities must be [bucket][pool], one row per bucket rate and one column per price")
        if any(r < 0 for r in self.bucket_rates) or any(p <= 0 for p in self.prices):
            raise ValueError("rates must be >= 0 and prices > 0")

    @property
    def n_buckets(self) -> int:
        return len(self.bucket_rates)

    @property
    def n_pools(self) -> int:
        return len(self.prices)


@dataclass(frozen=True)
class MixSolution:
    """Replicas per pool, the share of each bucket each pool serves ([bucket][pool]), $/hour, and the solver's time."""

    replicas: list[int]
    shares: list[list[float]]
    usd_per_hour: float
    solve_seconds: float


@dataclass(frozen=True, slots=True)
class SingleFleet:
    """One pool serving every bucket: its replicas and $/hour."""

    pool: int
    replicas: int
    usd_per_hour: float


def undominated(problem: MixProblem) -> list[int]:
    """The pools no other pool dominates (no dearer, and carrying at least as much of every bucket), in order.

    Dropping a dominated pool cannot raise the optimum: its replicas are replaced one for one by the
    dominating pool's. Of identical pools the first is kept, so callers list their preferred ones first.
    """
    caps = np.asarray(problem.capacities, dtype=float)

    def dominates(a: int, b: int) -> bool:
        return problem.prices[a] <= problem.prices[b] and bool(np.all(caps[:, a] >= caps[:, b]))

    return [
        q
        for q in range(problem.n_pools)
        if not any(dominates(p, q) and (p < q or not dominates(q, p)) for p in range(problem.n_pools) if p != q)
    ]


def single_fleets(problem: MixProblem) -> list[SingleFleet]:
    """Every pool that can serve all the traffic alone, with the replicas it needs, cheapest first."""
    fleets = []
    for p, price in enumerate(problem.prices):
        caps = [row[p] for row in problem.capacities]
        if any(c <= 0 and r > 0 for c, r in zip(caps, problem.bucket_rates, strict=True)):
            continue
        load = sum(r / c for r, c in zip(problem.bucket_rates, caps, strict=True) if r > 0)
        replicas = max(0, math.ceil(load - 1e-9))
        fleets.append(SingleFleet(p, replicas, replicas * price))
    return sorted(fleets, key=lambda f: (f.usd_per_hour, f.pool))


def best_single(problem: MixProblem) -> SingleFleet | None:
    """The cheapest pool serving every bucket alone, or None when no pool serves them all."""
    return next(iter(single_fleets(problem)), None)


@contextlib.contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """HiGHS's C++ core prints debug lines on file descriptor 1 on larger problems, whatever ``disp`` says;
    they would corrupt ``plan --json``. Only descriptor 1 is redirected, and only while the solver runs."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w", encoding="utf-8") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve_mix(problem: MixProblem) -> MixSolution | None:
    """The cheapest replica counts and routing shares, or None when some bucket no pool can serve."""
    n_b, n_p = problem.n_buckets, problem.n_pools
    caps = np.asarray(problem.capacities, dtype=float)
    rates = np.asarray(problem.bucket_rates, dtype=float)
    servable = caps > 0
    if any(rates[b] > 0 and not servable[b].any() for b in range(n_b)):
        return None
    # Variables: n_0..n_{P-1}, then x[b][p] row by row.
    cost = np.concatenate([np.asarray(problem.prices, dtype=float), np.zeros(n_b * n_p)])
    every_request = np.zeros((n_b, n_p + n_b * n_p))
    load = np.zeros((n_p, n_p + n_b * n_p))
    for b in range(n_b):
        every_request[b, n_p + b * n_p : n_p + (b + 1) * n_p] = 1.0
        for p in range(n_p):
            if servable[b, p]:
                load[p, n_p + b * n_p + p] = rates[b] / caps[b, p]
    for p in range(n_p):
        load[p, p] = -1.0
    upper_n = math.ceil(sum(rates[b] / caps[b][servable[b]].min() for b in range(n_b) if rates[b] > 0)) + 1
    upper = np.concatenate([np.full(n_p, upper_n), servable.astype(float).ravel()])
    start = time.perf_counter()
    with _native_stdout_silenced():
        result = milp(
            cost,
            constraints=[LinearConstraint(every_request, 1.0, 1.0), LinearConstraint(load, -np.inf, 1e-9)],
            integrality=np.concatenate([np.ones(n_p), np.zeros(n_b * n_p)]),
            bounds=Bounds(np.zeros(n_p + n_b * n_p), upper),
        )
    elapsed = time.perf_counter() - start
    if not result.success or result.x is None:
        return None
    replicas = [round(v) for v in result.x[:n_p]]
    shares = np.clip(result.x[n_p:].reshape(n_b, n_p), 0.0, 1.0)
    usd = float(sum(n * price for n, price in zip(replicas, problem.prices, strict=True)))
    return MixSolution(replicas, [[float(s) for s in row] for row in shares], usd, elapsed)


def hourly_usd(problem: MixProblem, scales: list[float], single_pool: int) -> tuple[float, float]:
    """$ over hours whose rates are `problem`'s x each scale: the mix re-solved each hour (every pool autoscaled),
    and pool `single_pool` alone, autoscaled the same way. An hour no fleet serves counts as infinite."""
    mix_usd = single_usd = 0.0
    for scale in scales:
        hour = MixProblem([r * scale for r in problem.bucket_rates], problem.capacities, problem.prices)
        solution = solve_mix(hour)
        mix_usd += math.inf if solution is None else solution.usd_per_hour
        single = next((f for f in single_fleets(hour) if f.pool == single_pool), None)
        single_usd += math.inf if single is None else single.usd_per_hour
    return mix_usd, single_usd
