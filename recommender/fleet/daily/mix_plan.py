"""The GPU mix for a spec: pools from the planned configurations, capacities per length bucket, the MILP, the answer.

Every priced (GPU, scheme) configuration of the plan is a candidate pool, served as planned
(tensor-parallel degree, batch size). For each length bucket the continuous-batching
simulator finds the rate one replica of the pool carries within the SLA on that bucket's own
lengths (`perf.capacity.max_rate_within_sla`); `gpu_mix.solve_mix` picks the replica counts and
routing. A mix is recommended only when it beats the best single pool by more than the
decision's tie tolerance (`perf.pricing.COST_TOLERANCE`); the single pool is priced with the same
bucket capacities, so the comparison is like for like.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from recommender.config.candidate import Candidate
from recommender.engines import EngineLaunch
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.speed import Setup
from recommender.fleet.daily.gpu_mix import (
    MixProblem,
    MixSolution,
    SingleFleet,
    best_single,
    hourly_usd,
    solve_mix,
    undominated,
)
from recommender.fleet.daily.length_buckets import BucketLengths, LengthBucket
from recommender.fleet.launch import launch_commands
from recommender.perf.pricing import COST_TOLERANCE, HOURS_PER_MONTH
from recommender.perf.sim.capacity import max_rate_within_sla
from recommender.perf.sim.serving import SIMULATED_REQUESTS
from recommender.provenance import Provenance
from recommender.quantize.precisions import least_quantized

__all__ = ["GpuMix", "MixPool", "PoolOption", "Route", "plan_mix"]


@dataclass(frozen=True, slots=True)
class PoolOption:
    """A configuration a pool may run, and what is known of its quality (a measured verdict, or a labelled prior)."""

    candidate: Candidate
    quality: str


@dataclass(frozen=True)
class MixPool:
    """One pool of the mix: a GPU type with a serving scheme, its replicas, its bill and its launch commands."""

    key: str
    hardware: str
    precision: str
    method: str
    tensor_parallel: int
    batch_size: int
    replicas: int
    usd_per_month: float
    quality: str
    launch: list[EngineLaunch]
    #: For a checkpoint scheme, the command that writes the checkpoint the launch serves; None otherwise.
    prepare: str | None = None


@dataclass(frozen=True)
class Route:
    """Where one length bucket goes: the share of its requests each pool serves (pool key -> share)."""

    bucket: LengthBucket
    rate_rps: float
    shares: dict[str, float]


@dataclass(frozen=True)
class GpuMix:
    """The cheapest mix at the peak hour against the best single pool, and whether the mix is worth it.

    ``capacities_rps`` is [bucket][option] for the pools the MILP chose among, named in ``options`` (0: misses
    the SLA); pools another dominates (no dearer, carrying as much of every bucket) are left out before it.
    """

    pools: list[MixPool]
    routes: list[Route]
    usd_per_month: float
    single_key: str
    single_replicas: int
    usd_per_month_single: float
    recommended: bool
    verdict: str
    solve_seconds: float
    options: list[str]
    capacities_rps: list[list[float]]
    provenance: Provenance
    #: Over the profile's day, every pool autoscaled hour by hour: the mix re-solved each hour, and the best
    #: single type's fleet (same rule, same headroom), $/month.
    usd_per_month_autoscaled: float | None = None
    usd_per_month_single_autoscaled: float | None = None


def _capacity(setup: Setup, bucket: BucketLengths, performance: PerformanceEvaluator) -> float:
    sla = performance.simulated_sla(setup.engine)
    cost = performance.checked_step_cost(setup.step_cost, setup.engine)  # at the SLA's confidence, as the search checks
    search = max_rate_within_sla(
        cost,
        setup.scheduler,
        prompt=bucket.prompt,
        output=bucket.output,
        ttft_p99_ms=sla.ttft_p99_ms,
        tpot_p99_ms=sla.tpot_p99_ms,
        n_requests=SIMULATED_REQUESTS,
    )
    return search.rate_per_s


def _hourly(setup: Setup) -> float:
    assert setup.price_per_hour_usd is not None  # the pools are the plan's priced rows, set up requiring a price
    return setup.price_per_hour_usd


def _problem(
    performance: PerformanceEvaluator, candidates: list[Candidate], buckets: list[BucketLengths], peak_rps: float
) -> tuple[MixProblem, list[int]]:
    """The MILP over the pools no other pool dominates, and their indices in `candidates`."""
    # Each with the engine its evaluation picked; planned configurations run and fit (else `Refused` propagates).
    usable = [performance.chosen_setup(c) for c in candidates]
    capacities = [[_capacity(s, b, performance) for s in usable] for b in buckets]
    prices = [_hourly(s) * c.tensor_parallel for s, c in zip(usable, candidates, strict=True)]
    full = MixProblem([peak_rps * b.bucket.share for b in buckets], capacities, prices)
    kept = undominated(full)
    problem = MixProblem(full.bucket_rates, [[row[k] for k in kept] for row in capacities], [prices[k] for k in kept])
    return problem, kept


def _least_quantized_first(c: Candidate) -> tuple[int, int, str]:
    """The decision's tie order: of two pools that serve alike, the one with more bits is kept."""
    return (*least_quantized(c.precision, c.kv_cache_dtype), c.key)


def _verdict(mix_usd: float, single: SingleFleet, single_key: str) -> tuple[bool, str]:
    single_usd = single.usd_per_hour
    saving = 100.0 * (single_usd - mix_usd) / single_usd if single_usd else 0.0
    if mix_usd < single_usd / (1 + COST_TOLERANCE):
        return True, f"the mix saves {saving:.1f} % against the best single type ({single_key})"
    return False, (
        f"single type wins: {single_key} alone costs {-saving:.1f} % more than the mix"
        if saving > 0
        else f"single type wins: {single_key} alone is as cheap as any mix"
    ) + f" (a mix must save more than the {COST_TOLERANCE:.0%} tie tolerance)"


def _checkpoint(c: Candidate, model: str) -> tuple[str | None, str | None]:
    """A checkpoint scheme's directory and the command that writes it (engines serve it from there), or Nones."""
    if c.base_scheme.checkpoint_format is None:
        return None, None
    directory = f"checkpoints/{model.rsplit('/', 1)[-1]}-{c.method}"
    command = ["recommender", "quantize", "--model", model, "--scheme", c.method, "--out", directory]
    return directory, shlex.join(command)


def _pools(
    solution: MixSolution,
    problem: MixProblem,
    chosen: list[PoolOption],
    *,
    model: str,
    buckets: list[BucketLengths],
    performance: PerformanceEvaluator,
) -> list[MixPool]:
    pools = []
    for p, (option, n) in enumerate(zip(chosen, solution.replicas, strict=True)):
        if n == 0:
            continue
        c = option.candidate
        served = [b.bucket for b, shares in zip(buckets, solution.shares, strict=True) if shares[p] > 1e-6]
        context = max(b.p99_prompt_tokens for b in served) + max(b.p99_output_tokens for b in served)
        checkpoint, prepare = _checkpoint(c, model)
        pools.append(
            MixPool(
                c.key,
                c.hardware,
                c.precision,
                c.method,
                c.tensor_parallel,
                c.batch_size,
                n,
                n * problem.prices[p] * HOURS_PER_MONTH,
                option.quality,
                launch_commands(
                    c, model=model, max_model_len=context, checkpoint=checkpoint, device=performance.device_of(c)
                ),
                prepare,
            )
        )
    return pools


def plan_mix(
    performance: PerformanceEvaluator,
    options: list[PoolOption],
    buckets: list[BucketLengths],
    *,
    hourly_rps: list[float],
    headroom: float,
    model: str,
) -> GpuMix | None:
    """The mix of `options` serving the peak of `hourly_rps` x `headroom`, and over the day; None when no pool
    serves every bucket.

    `options` must run and fit (priced plan rows, or evaluated search candidates); only schemes whose
    quality passed, or priors labelled as such, belong in it.
    """
    pairs = sorted(options, key=lambda option: _least_quantized_first(option.candidate))
    peak_rps = max(hourly_rps)
    problem, kept = _problem(performance, [o.candidate for o in pairs], buckets, peak_rps * headroom)
    chosen = [pairs[k] for k in kept]
    solution, single = solve_mix(problem), best_single(problem)
    if solution is None or single is None:
        return None
    single_key = chosen[single.pool].candidate.key
    day_mix, day_single = hourly_usd(problem, [r / peak_rps for r in hourly_rps], single.pool)
    per_hour_of_day = HOURS_PER_MONTH / len(hourly_rps)
    recommended, verdict = _verdict(solution.usd_per_hour, single, single_key)
    routes = [
        Route(b.bucket, rate, {chosen[p].candidate.key: s for p, s in enumerate(shares) if s > 1e-6})
        for b, rate, shares in zip(buckets, problem.bucket_rates, solution.shares, strict=True)
    ]
    return GpuMix(
        pools=_pools(solution, problem, chosen, model=model, buckets=buckets, performance=performance),
        routes=routes,
        usd_per_month=solution.usd_per_hour * HOURS_PER_MONTH,
        single_key=single_key,
        single_replicas=single.replicas,
        usd_per_month_single=single.usd_per_hour * HOURS_PER_MONTH,
        recommended=recommended,
        verdict=verdict,
        solve_seconds=solution.solve_seconds,
        options=[o.candidate.key for o in chosen],
        capacities_rps=problem.capacities,
        provenance=Provenance(
            "calibrated",
            "calibrated step costs + continuous-batching simulation per length bucket; "
            f"MILP (scipy.optimize.milp, HiGHS) at the peak hour x {headroom:g} headroom; "
            f"{len(pairs) - len(kept)} dominated pool(s) of {len(pairs)} left out",
        ),
        usd_per_month_autoscaled=day_mix * per_hour_of_day,
        usd_per_month_single_autoscaled=day_single * per_hour_of_day,
    )
