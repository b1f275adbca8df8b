"""Capacity of one replica: the highest arrival rate whose simulated P99s meet the SLA at steady state.

P99s near capacity rise steeply (queueing), so the answer is found by simulation, not by
a formula: bisect the Poisson arrival rate, replaying the same requests at every rate. The bisection's
probes are short runs (``settle.probe``: the first run's requests, the warm-up and drain dropped), each
still judged for overload (its backlog growing while the time to first token climbs: refused whatever its
P99s). Only the answer is run to steady state (``settle.steady``: Little's law) and checked at twice its
requests (``settle.settle``); an answer that fails there (a queue a short run ended before, or P99s that
rose with the batch filling) steps down to the rate the check points at, at most ``STEP_DOWNS`` times, each
step checked the same way, before the search falls back to steady-state probes below it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.sim.scheduler_config import fits_kv_cache
from recommender.perf.sim.settle import (
    FIRST_REQUESTS,
    Settled,
    in_flight,
    is_steady,
    probe,
    requests_for,
    settle,
    steady,
)
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

#: How far over its mean-context count a KV cache's batch is let run in the throughput ceiling (short requests).
KV_SLACK = 1.25
#: How many times an answer refused at steady state steps down to the rate its check points at (each step checked at
#: steady state) before the search falls back to steady-state probes below it.
STEP_DOWNS = 2
#: How much coarser than the search's tolerance a refined step down is bisected (each probe a steady run).
REFINE_TOL = 2.0
#: The range of one step down, as a fraction of the refused rate.
STEP_RANGE = (0.5, 0.95)
#: Where the steps down do not mend a refusal, steady runs descend from it by this factor until one holds (high
#: rates are the cheap runs: a batch's steps serve many requests at once; a trickle's, one).
DESCENT = 0.7


@dataclass(frozen=True)
class RateSearch:
    """The highest arrival rate found within the SLA, the simulation there, and how many runs it took.

    ``rate_per_s`` is 0.0 (and ``result`` None) when even a lone request misses the SLA. ``settled`` says
    how many requests the answer's P99s rest on and how they held when doubled; ``limit`` why the lowest
    rate refused above it was refused ("" when none was: the decode-only ceiling itself met the SLA).
    """

    rate_per_s: float
    result: SimulationResult | None
    evaluations: int
    settled: Settled | None = None
    limit: str = ""


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
    #: The mean time a request spent in the system at the highest rate judged feasible so far: at a higher
    #: rate it is at least this, so rate x it is a floor on the requests in flight there.
    request_s: float = 0.0
    #: The lowest rate refused at steady state so far, and why.
    refused: float = math.inf
    refusal: str = ""

    def workload(self, rate: float, n: int) -> Workload:
        return make_workload(
            prompt=self.prompt,
            output=self.output,
            n_requests=n,
            rate=rate,
            seed=self.seed,
            prefix=self.prefix,
            conversation=self.conversation,
            cache_prefixes=self.cache_prefixes,
        )

    def runner(self, rate: float) -> Callable[[int], SimulationResult]:
        """The first n of the same requests at `rate`, simulated (each run counted)."""

        def run(n: int) -> SimulationResult:
            self.evaluations += 1
            return simulate(
                self.cost,
                self.workload(rate, n),
                self.config,
                speculation=self.speculation,
            )

        return run

    def judge(self, rate: float) -> Settled:
        """`rate`'s probe: the first run alone (`n_requests`, fewer where the last feasible rate's requests in
        flight ask for fewer), judged for overload but not grown (``settle.probe``)."""
        return probe(
            self.runner(rate),
            rate,
            min(self.n_requests, requests_for(rate * self.request_s)),
        )

    def judge_steady(self, rate: float) -> Settled:
        """`rate` simulated at its steady state, its requests in flight predicted from the last feasible rate."""
        return steady(
            self.runner(rate),
            rate,
            rate * self.request_s,
            first=self.n_requests,
            decided=self._breaks,
        )

    def check(self, rate: float, start: Settled | None = None) -> Settled:
        """`rate` at its steady state (or `start`, a steady run already made there), checked at twice its requests."""
        run = self.runner(rate)
        return settle(
            run,
            rate,
            start if start is not None else steady(run, rate, rate * self.request_s, first=self.n_requests),
            doublings=1,
        )

    def step_down(self, rate: float, run: Settled) -> float:
        """The rate an answer refused at steady state points at: the rate its completions kept up with (overloaded),
        or the rate scaled by the fourth root of how far its P99 nearest over the limit was over it (P99s near the
        capacity rise steeply: a few percent of rate moves them tens of percent), within ``STEP_RANGE``."""
        r = run.result
        if run.overloaded:
            factor = (1 - run.backlog) * STEP_RANGE[1]
        else:
            limits = (
                (self.ttft_p99_ms, r.ttft_ms.p99),
                (self.tpot_p99_ms, r.tpot_ms.p99),
            )
            factor = min(
                ((limit / p99) ** 0.25 for limit, p99 in limits if p99 > limit),
                default=STEP_RANGE[1],
            )
        return rate * min(STEP_RANGE[1], max(STEP_RANGE[0], factor))

    def _breaks(self, run: Settled) -> bool:
        """Whether `run` already misses the SLA (a longer run, its batch fuller, would miss it by more)."""
        return not run.result.meets(ttft_p99_ms=self.ttft_p99_ms, tpot_p99_ms=self.tpot_p99_ms)

    def ok(self, rate: float, run: Settled) -> bool:
        """Whether `run` is within the SLA at a steady state (a feasible run's request time is remembered)."""
        if run.overloaded:
            return False
        if not run.result.meets(ttft_p99_ms=self.ttft_p99_ms, tpot_p99_ms=self.tpot_p99_ms):
            return False
        self.request_s = max(self.request_s, in_flight(run.result, rate) / rate)
        return True

    def why(self, rate: float, run: Settled) -> str:
        """Why `rate` was refused: overloaded, or the P99 over its limit."""
        r = run.result
        at = f"at {rate:.3g} req/s ({run.describe()})"
        if run.overloaded:
            return f"refused {at}"
        over = []
        if r.ttft_ms.p99 > self.ttft_p99_ms:
            over.append(f"P99 TTFT {r.ttft_ms.p99:,.0f} ms > {self.ttft_p99_ms:g} ms")
        if r.tpot_ms.p99 > self.tpot_p99_ms:
            over.append(f"P99 TPOT {r.tpot_ms.p99:,.1f} ms > {self.tpot_p99_ms:g} ms")
        return f"{' and '.join(over)} {at}"

    def decode_only_rate(self) -> float:
        """Requests/s a full batch finishes when it only decodes: an upper bound on any sustainable rate (a full
        batch: the cap, or as many sequences of the mean context as the KV cache holds, if fewer)."""
        unit = self.workload(1.0, FIRST_REQUESTS)
        mean_prompt = float(unit.prompt_tokens.mean())
        mean_output = float(unit.output_tokens.mean())
        # The batch the KV cache holds at the mean context, if fewer than the cap, with room for a spell of short
        # requests (shared prefixes hold less each: there, the cap).
        held = self.config.kv_cache_tokens * KV_SLACK // (mean_prompt + mean_output / 2)
        shared = self.prefix is not None or self.conversation is not None
        batch = self.config.max_num_seqs if shared else max(1, min(self.config.max_num_seqs, int(held)))
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
    n_requests: int = FIRST_REQUESTS,
    seed: int = 0,
    rel_tol: float = 0.02,
    prefix: SharedPrefix | None = None,
    conversation: Conversation | None = None,
    speculation: SpeculativeDecoding | None = None,
    cache_prefixes: bool = True,
) -> RateSearch:
    """Bisect the Poisson arrival rate for the highest one whose steady-state P99 TTFT and TPOT meet the SLA.

    Every rate replays the same requests (``make_workload`` with the same seed: same lengths,
    the same arrival gaps rescaled), so the comparison between rates is not blurred by
    sampling noise, and ``make_workload(rate=search.rate_per_s, n_requests=search.settled.requests, ...)``
    reproduces ``result``. Each probe runs `n_requests` (``settle.probe``); an overloaded rate is refused. The
    search brackets the rate between a trickle and the batch's decode-only throughput (an upper bound on any
    sustainable rate) and narrows the bracket until it is within `rel_tol` of its upper end. The answer alone
    is then run to its steady state and its requests doubled once (``settle.settle``); an answer whose P99s
    then miss the SLA, or whose queue then grows, is refused and the search steps down (``_checked``), then,
    if that fails too, bisects below it with steady-state probes (P99s that moved by ``settle.TOLERANCE`` or
    more are kept, and said to be: ``settled``).
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
    if not fits_kv_cache(trials.workload(1.0, n_requests), config):
        # Drawn lengths (a long tail, a trace) can hold a request no KV cache of this replica holds: it would
        # never be scheduled, so no arrival rate meets the SLA.
        return RateSearch(0.0, None, 0)
    return _search(trials, rel_tol)


def _search(trials: _RateTrials, rel_tol: float) -> RateSearch:
    """Short probes bracket the rate between a trickle and the decode-only ceiling; the answer is checked at steady
    state, stepping down, descending and at worst bisecting with steady runs where the probes misled it."""
    guess = trials.decode_only_rate()
    trickle = trials.judge(guess / 1000)
    if not trials.ok(guess / 1000, trickle):
        return RateSearch(0.0, None, trials.evaluations, limit=trials.why(guess / 1000, trickle))
    # `guess` is the decode-only throughput of a full batch: no rate above it is sustainable.
    feasible, hi, limit = [(guess / 1000, trickle)], guess, ""
    ceiling = trials.judge(hi)
    if trials.ok(hi, ceiling):
        feasible.append((hi, ceiling))
    else:
        limit = trials.why(hi, ceiling)
    hi, limit = _bisect(trials, feasible, hi, limit, rel_tol, trials.judge)
    found = _checked(trials, feasible[-1], limit, guess / 1000, rel_tol)
    if found is not None:
        return found
    # Short probes misled the search more than STEP_DOWNS steps mend: steady runs descend from the last refusal,
    # and only if they reach the trickle does a bisection with steady-state probes start from it.
    descended = _descend(trials, guess / 1000, rel_tol)
    if descended is not None:
        return descended
    return _steady_search(trials, [(guess / 1000, trickle)], rel_tol)


def _descend(trials: _RateTrials, lowest: float, rel_tol: float) -> RateSearch | None:
    """Steady runs at rates falling by ``DESCENT`` from ``trials.refused`` until one holds at twice its requests,
    then bisected back up towards the refusal above it (``_refined``); None where the descent reaches `lowest`."""
    rate = trials.refused * DESCENT
    while rate > lowest:
        run = trials.judge_steady(rate)
        if trials.ok(rate, run):
            run = trials.check(rate, run)
            if trials.ok(rate, run):
                return _refined(trials, rate, run, rel_tol)
        trials.refused, trials.refusal = rate, trials.why(rate, run)
        rate *= DESCENT
    return None


def _steady_search(trials: _RateTrials, feasible: list[tuple[float, Settled]], rel_tol: float) -> RateSearch:
    """The bisection below ``trials.refused`` with steady-state probes, each answer checked at twice its requests and
    the search going on below it if refused there; `feasible` holds the trickle."""
    hi, limit = trials.refused, trials.refusal
    while True:
        hi, limit = _bisect(trials, feasible, hi, limit, rel_tol, trials.judge_steady)
        rate, start = feasible.pop()
        final = trials.check(rate, start if feasible else None)  # the trickle's run is a probe, not a steady one
        if trials.ok(rate, final):
            return RateSearch(rate, final.result, trials.evaluations, final, limit)
        if not feasible:
            return RateSearch(0.0, None, trials.evaluations, limit=trials.why(rate, final))
        hi, limit = rate, trials.why(rate, final)


def _checked(
    trials: _RateTrials,
    answer: tuple[float, Settled],
    limit: str,
    lowest: float,
    rel_tol: float,
) -> RateSearch | None:
    """The short search's answer (its rate and probe) checked at steady state (from its probe where that is already
    steady), stepping down at most ``STEP_DOWNS`` times (never below `lowest`) and, from a step that holds, bisecting
    back up to the refusal with steady-state probes; None when every step was refused (``trials.refused``/``refusal``
    say the last)."""
    rate, start = answer
    for step in range(1 + STEP_DOWNS):
        final = trials.check(rate, start if step == 0 and is_steady(start, rate) else None)
        if trials.ok(rate, final):
            return (
                RateSearch(rate, final.result, trials.evaluations, final, limit)
                if step == 0
                else (_refined(trials, rate, final, rel_tol))
            )
        trials.refused, trials.refusal = rate, trials.why(rate, final)
        limit = trials.refusal
        rate = max(lowest, trials.step_down(rate, final))
    return None


def _refined(trials: _RateTrials, rate: float, final: Settled, rel_tol: float) -> RateSearch:
    """`rate`, a step down that held at steady state, bisected up towards the refusal above it with steady-state
    probes to within ``REFINE_TOL`` x `rel_tol` of it (a step down lands below the capacity: P99s near it rise
    steeply); the highest found whose check at twice
    its requests holds (the bisection going on below one refused there), or `rate`."""
    feasible, hi, limit = [(rate, final)], trials.refused, trials.refusal
    while True:
        hi, limit = _bisect(trials, feasible, hi, limit, REFINE_TOL * rel_tol, trials.judge_steady)
        if len(feasible) == 1:
            return RateSearch(rate, final.result, trials.evaluations, final, limit)
        higher, start = feasible.pop()
        checked = trials.check(higher, start)
        if trials.ok(higher, checked):
            return RateSearch(higher, checked.result, trials.evaluations, checked, limit)
        hi, limit = higher, trials.why(higher, checked)


def _bisect(
    trials: _RateTrials,
    feasible: list[tuple[float, Settled]],
    hi: float,
    limit: str,
    rel_tol: float,
    judge: Callable[[float], Settled],
) -> tuple[float, str]:
    """Narrow [the highest feasible rate, `hi`] to within `rel_tol` of `hi`, appending each feasible rate found
    to `feasible`; the new `hi` and why it was refused."""
    lo = feasible[-1][0]
    while hi - lo > rel_tol * hi:
        # Geometric steps while the bracket spans more than 2x (the first at a quarter of the top at least: a probe at a
        # trickle's rate is the costliest, one request's steps at a time), arithmetic after.
        mid = max(math.sqrt(lo * hi), hi / 4) if hi > 2 * lo else (lo + hi) / 2
        run = judge(mid)
        if trials.ok(mid, run):
            feasible.append((mid, run))
            lo = mid
        else:
            hi, limit = mid, trials.why(mid, run)
    return hi, limit


def replicas_needed(target_rate: float, max_rate: float) -> int:
    """Replicas that together serve `target_rate` when each serves at most `max_rate` within the SLA.

    The 1e-9 slack keeps an exact multiple (30 requests/s at 10 per replica) from rounding up
    to one replica more through floating-point error.
    """
    if max_rate <= 0:
        raise ValueError("no arrival rate meets the SLA on one replica; more replicas will not help")
    return max(1, math.ceil(target_rate / max_rate - 1e-9))
