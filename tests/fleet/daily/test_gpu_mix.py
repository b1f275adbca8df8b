"""The GPU-mix MILP against brute force: every integer fleet enumerated, routing checked by an LP.

Small instances (three length buckets, three GPU pools) with random capacities and prices, and one
whose capacities come from the real simulator on catalog GPUs; the MILP's cost must equal the
cheapest fleet brute force finds, and its routing must serve every request within every pool's capacity.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.speed import Setup
from recommender.fleet.daily.gpu_mix import MixProblem, MixSolution, best_single, solve_mix, undominated
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.capacity import max_rate_within_sla


def _routable(problem: MixProblem, replicas: tuple[int, ...]) -> bool:
    """Whether some routing serves every bucket with these replicas (an LP with no objective)."""
    n_b, n_p = problem.n_buckets, problem.n_pools
    caps = np.asarray(problem.capacities)
    a_eq = np.zeros((n_b, n_b * n_p))
    a_ub = np.zeros((n_p, n_b * n_p))
    bounds = []
    for b in range(n_b):
        for p in range(n_p):
            a_eq[b, b * n_p + p] = 1.0
            if caps[b, p] > 0:
                a_ub[p, b * n_p + p] = problem.bucket_rates[b] / caps[b, p]
            bounds.append((0.0, 1.0 if caps[b, p] > 0 else 0.0))
    result = linprog(
        np.zeros(n_b * n_p),
        A_ub=a_ub,
        b_ub=np.asarray(replicas, dtype=float) + 1e-9,
        A_eq=a_eq,
        b_eq=np.ones(n_b),
        bounds=bounds,
        method="highs",
    )
    return bool(result.status == 0)


def _brute_force(problem: MixProblem, most: int) -> float:
    """The cheapest $/hour over every fleet of 0..`most` replicas per pool that can route all the traffic."""
    best = math.inf
    for replicas in itertools.product(range(most + 1), repeat=problem.n_pools):
        usd = sum(n * price for n, price in zip(replicas, problem.prices, strict=True))
        if usd < best and _routable(problem, replicas):
            best = usd
    return best


def _assert_serves(problem: MixProblem, solution: MixSolution) -> None:
    shares = np.asarray(solution.shares)
    assert np.allclose(shares.sum(axis=1), 1.0, atol=1e-6)
    for p, n in enumerate(solution.replicas):
        load = sum(
            shares[b, p] * problem.bucket_rates[b] / problem.capacities[b][p]
            for b in range(problem.n_buckets)
            if problem.capacities[b][p] > 0
        )
        assert load <= n + 1e-6
        assert all(shares[b, p] < 1e-9 for b in range(problem.n_buckets) if problem.capacities[b][p] == 0)


def _random_problem(seed: int) -> MixProblem:
    rng = np.random.default_rng(seed)
    caps = rng.uniform(1.0, 20.0, size=(3, 3)) * (rng.uniform(size=(3, 3)) > 0.2)
    caps[:, 0] = np.maximum(caps[:, 0], 0.5)  # some pool serves every bucket
    return MixProblem(
        bucket_rates=[float(r) for r in rng.uniform(0.5, 25.0, size=3)],
        capacities=[[float(c) for c in row] for row in caps],
        prices=[float(p) for p in rng.choice([0.8, 1.9, 2.5, 4.0], size=3, replace=False)],
    )


@pytest.mark.parametrize("seed", range(12))
def test_milp_equals_brute_force_on_random_instances(seed: int) -> None:
    problem = _random_problem(seed)
    solution = solve_mix(problem)
    assert solution is not None
    _assert_serves(problem, solution)
    single = best_single(problem)
    assert single is not None and solution.usd_per_hour <= single.usd_per_hour + 1e-9
    assert solution.usd_per_hour == pytest.approx(_brute_force(problem, max(single.replicas, 1)), abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_dropping_dominated_pools_keeps_the_optimum(seed: int) -> None:
    problem = _random_problem(seed)
    kept = undominated(problem)
    reduced = MixProblem(
        problem.bucket_rates, [[row[k] for k in kept] for row in problem.capacities], [problem.prices[k] for k in kept]
    )
    full, small = solve_mix(problem), solve_mix(reduced)
    assert full is not None and small is not None
    assert small.usd_per_hour == pytest.approx(full.usd_per_hour, abs=1e-9)


def test_a_bucket_no_pool_serves_has_no_mix() -> None:
    problem = MixProblem([1.0, 2.0], [[3.0, 0.0], [0.0, 0.0]], [1.0, 2.0])
    assert solve_mix(problem) is None and best_single(problem) is None


def test_milp_equals_brute_force_on_simulated_capacities() -> None:
    """Three prompt-length buckets x three catalog GPUs, capacities from the simulator (modeled), 8B in fp8/bf16."""
    _, shape = load_architecture("llama-3.1-8b")
    sla = LatencySLA(ttft_p99_ms=1500, tpot_p99_ms=60)
    performance = PerformanceEvaluator(
        load_catalog(), shape, Traffic(prompt_tokens=1000, output_tokens=200, requests_per_second=10), sla
    )
    pools = [
        Candidate("fp8", "fp8-dynamic", "l40s", 64),
        Candidate("bf16", "baseline", "a100-80gb", 64),
        Candidate("fp8", "fp8-dynamic", "h100-sxm", 64),
    ]
    setups = [performance.setup(c) for c in pools]
    assert all(isinstance(s, Setup) for s in setups)
    buckets = [(200, 200), (1500, 250), (5000, 250)]
    capacities = [
        [
            max_rate_within_sla(
                s.step_cost,
                s.scheduler,
                prompt=p,
                output=o,
                ttft_p99_ms=sla.ttft_p99_ms,
                tpot_p99_ms=sla.tpot_p99_ms,
                n_requests=300,
            ).rate_per_s
            for s in setups
            if isinstance(s, Setup)
        ]
        for p, o in buckets
    ]
    prices = [s.price_per_hour_usd for s in setups if isinstance(s, Setup)]
    problem = MixProblem([12.0, 6.0, 2.0], capacities, prices)
    solution, single = solve_mix(problem), best_single(problem)
    assert solution is not None and single is not None
    _assert_serves(problem, solution)
    assert solution.usd_per_hour == pytest.approx(_brute_force(problem, single.replicas), abs=1e-9)


def test_over_the_day_each_hour_is_solved_on_its_own() -> None:
    """Hours at the peak cost the peak's fleet; an hour at a quarter of it, the cheapest fleet for a quarter."""
    problem = _random_problem(11)
    peak, single = solve_mix(problem), best_single(problem)
    quarter = solve_mix(MixProblem([r / 4 for r in problem.bucket_rates], problem.capacities, problem.prices))
    assert peak is not None and single is not None and quarter is not None
    from recommender.fleet.daily.gpu_mix import hourly_usd

    mix_usd, single_usd = hourly_usd(problem, [1.0, 1.0, 0.25], single.pool)
    assert mix_usd == pytest.approx(2 * peak.usd_per_hour + quarter.usd_per_hour)
    assert quarter.usd_per_hour < peak.usd_per_hour and single_usd <= 3 * single.usd_per_hour
