"""Capacity of one replica: the highest arrival rate whose simulated P99s meet the SLA.

P99s near capacity rise steeply (queueing), so the answer is found by simulation, not by
a formula: bisect the Poisson arrival rate, replaying the same requests at every rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.sim.scheduler_config import fits_kv_cache
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import make_workload

if TYPE_CHECKING:
    from recommender.perf.sim.conversation import Conversation
    from recommender.perf.sim.results import SimulationResult
    from recommender.perf.sim.scheduler import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.workload import Lengths, SharedPrefix, Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["RateSearch", "max_rate_within_sla", "replicas_needed"]


@dataclass(frozen=True)
class RateSearch:
    """The highest arrival rate found within the SLA, the simulation there, and how many runs it took.

    ``rate_per_s`` is 0.0 (and ``result`` None) when even a lone request misses the SLA.
    """

    rate_per_s: float
    result: SimulationResult | None
    evaluations: int


@dataclass
class _RateTrials:
    """Simulations of the same requests at different Poisson rates, judged against the SLA and counted."""

    cost: StepCostModel
    config: SchedulerConfig
    prompt: Lengths
    output: Lengths
    n_requests: int
    seed: int
    ttft_p99_ms: float
    tpot_p99_ms: float
    prefix: SharedPrefix | None = None
    conversation: Conversation | None = None
    cache_prefixes: bool = True
    speculation: SpeculativeDecoding | None = None
    evaluations: int = 0

    def workload(self, rate: float) -> Workload:
        return make_workload(
            prompt=self.prompt,
            output=self.output,
            n_requests=self.n_requests,
            rate=rate,
            seed=self.seed,
            prefix=self.prefix,
            conversation=self.conversation,
            cache_prefixes=self.cache_prefixes,
        )

    def run(self, rate: float) -> SimulationResult:
        self.evaluations += 1
        return simulate(self.cost, self.workload(rate), self.config, speculation=self.speculation)

    def ok(self, result: SimulationResult) -> bool:
        return result.meets(ttft_p99_ms=self.ttft_p99_ms, tpot_p99_ms=self.tpot_p99_ms)

    def decode_only_rate(self) -> float:
        """Requests/s a full batch finishes when it only decodes: an upper bound on any sustainable rate."""
        unit = self.workload(1.0)
        mean_prompt = float(unit.prompt_tokens.mean())
        mean_output = float(unit.output_tokens.mean())
        batch = self.config.max_num_seqs
        context = int(batch * (mean_prompt + mean_output / 2))
        if self.speculation is None:
            return batch / (mean_output * self.cost.step_seconds(0, batch, context))
        from recommender.perf.sim.speculative import SpeculativeStepCost

        step = SpeculativeStepCost(self.cost, self.speculation).step_seconds(0, batch, context)
        return batch / (mean_output / self.speculation.tokens_per_step * step)


def max_rate_within_sla(
    cost: StepCostModel,
    config: SchedulerConfig,
    *,
    prompt: Lengths,
    output: Lengths,
    ttft_p99_ms: float,
    tpot_p99_ms: float,
    n_requests: int = 2000,
    seed: int = 0,
    rel_tol: float = 0.02,
    prefix: SharedPrefix | None = None,
    conversation: Conversation | None = None,
    speculation: SpeculativeDecoding | None = None,
    cache_prefixes: bool = True,
) -> RateSearch:
    """Bisect the Poisson arrival rate for the highest one whose P99 TTFT and P99 TPOT meet the SLA.

    Every rate replays the same requests (``make_workload`` with the same seed: same lengths,
    the same arrival gaps rescaled), so the comparison between rates is not blurred by
    sampling noise, and ``make_workload(rate=search.rate_per_s, ...)`` reproduces ``result``.
    The search brackets the rate between a trickle and the batch's decode-only throughput
    (an upper bound on any sustainable rate), then narrows the bracket until it is within
    `rel_tol` of its upper end.
    P99s near capacity rise steeply (queueing), so a rate a few percent above the answer
    can already miss the SLA.
    """
    trials = _RateTrials(
        cost,
        config,
        prompt,
        output,
        n_requests,
        seed,
        ttft_p99_ms,
        tpot_p99_ms,
        prefix,
        conversation,
        cache_prefixes,
        speculation,
    )
    if not fits_kv_cache(trials.workload(1.0), config):
        # Drawn lengths (a long tail, a trace) can hold a request no KV cache of this replica holds: it would
        # never be scheduled, so no arrival rate meets the SLA.
        return RateSearch(0.0, None, 0)
    return _bisect(trials, rel_tol)


def _bisect(trials: _RateTrials, rel_tol: float) -> RateSearch:
    """The bracket between a trickle and the decode-only throughput, narrowed to `rel_tol` of its upper end."""
    guess = trials.decode_only_rate()
    probe = trials.run(guess / 1000)
    if not trials.ok(probe):
        return RateSearch(0.0, None, trials.evaluations)
    lo, lo_result = guess / 1000, probe
    # `guess` is the decode-only throughput of a full batch: no rate above it is sustainable,
    # however loose the SLA (a finite simulation of an overloaded queue can still look fine).
    hi = guess
    ceiling = trials.run(hi)
    if trials.ok(ceiling):
        return RateSearch(hi, ceiling, trials.evaluations)
    while hi - lo > rel_tol * hi:
        # Geometric steps while the bracket spans more than 2x, arithmetic after.
        mid = math.sqrt(lo * hi) if hi > 2 * lo else (lo + hi) / 2
        result = trials.run(mid)
        if trials.ok(result):
            lo, lo_result = mid, result
        else:
            hi = mid
    return RateSearch(lo, lo_result, trials.evaluations)


def replicas_needed(target_rate: float, max_rate: float) -> int:
    """Replicas that together serve `target_rate` when each serves at most `max_rate` within the SLA.

    The 1e-9 slack keeps an exact multiple (30 requests/s at 10 per replica) from rounding up
    to one replica more through floating-point error.
    """
    if max_rate <= 0:
        raise ValueError("no arrival rate meets the SLA on one replica; more replicas will not help")
    return max(1, math.ceil(target_rate / max_rate - 1e-9))
