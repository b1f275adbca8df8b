"""A closed-loop benchmark replayed through the scheduler: C requests in flight, one sent as one finishes.

This is how serving benchmarks are run (`vllm bench serve --max-concurrency C`, genai-perf's
concurrency mode, and the calibration runs in ``shared/calibration``): the client opens C
requests at once, and sends the next when one completes. Its mean TTFT therefore includes
the opening burst — C prompts queued at t = 0 — unless the client drops a warm-up, and in
steady state new requests arrive exactly when others finish, at step boundaries.

The replay is the continuous-batching simulation of ``scheduler.py`` with arrivals set as
the run goes: the first C at time 0, every later one at the moment an earlier one finished.
Because every arrival sits on a step boundary, which requests share a step does not depend
on how long steps take, so a benchmark's mean latencies are linear in the step durations:
the calibration (``design_rows.py``) relies on that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.sim.scheduler import ContinuousBatchingSimulation
from recommender.perf.sim.workload import FloatArray, Workload, make_workload
from recommender.perf.step.cost import PrefillChunks

if TYPE_CHECKING:
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.step.cost import StepCostModel
    from recommender.perf.step.features import FeatureStepCost
    from recommender.provenance import Provenance

__all__ = ["BenchmarkLatencies", "ClosedLoopBenchmark", "ClosedLoopSimulation", "InterTokenStepCost", "replay"]


class ClosedLoopSimulation(ContinuousBatchingSimulation):
    """The scheduler simulation with a closed-loop client: `concurrency` requests in flight."""

    __slots__ = ("_released",)

    def __init__(self, cost: StepCostModel, workload: Workload, config: SchedulerConfig, *, concurrency: int) -> None:
        super().__init__(cost, workload, config)
        n = len(self._arrivals)
        opened = min(max(concurrency, 1), n)
        self._arrivals = [0.0] * opened + [math.inf] * (n - opened)
        self._released = opened

    def _release(self, finished: int) -> None:
        """Send one new request per finished one, at the current time."""
        for _ in range(finished):
            if self._released == len(self._arrivals):
                return
            self._arrivals[self._released] = self._t
            self._released += 1

    def _finish_decoders(self, step: int) -> None:
        before = len(self._running)
        super()._finish_decoders(step)
        self._release(before - len(self._running))

    def _finish_chunks(self, chunks: list[tuple[int, int]]) -> None:
        before = len(self._running)
        super()._finish_chunks(chunks)
        self._release(before - len(self._running))

    def sent_at(self) -> FloatArray:
        """When each request was sent (seconds; after `run`, every one has been)."""
        return np.asarray(self._arrivals, dtype=float)

    def _served_workload(self) -> Workload:
        w = self._workload
        return Workload(self.sent_at(), w.prompt_tokens, w.output_tokens)


@dataclass(frozen=True, slots=True)
class InterTokenStepCost:
    """`cost`'s steps as a client reporting the inter-token latency of decode steps sees them.

    A step that carries prompt chunks and decoders takes only its decode part (the same decoders and context,
    no chunks); one that only prefills takes no time (the floor). Which requests share a step does not depend
    on step times in a closed loop, so replaying with this cost gives the same steps with the stalls a median
    ITL leaves out removed, and each request's TPOT becomes the mean gap between its tokens in decode steps.
    """

    cost: FeatureStepCost

    @property
    def provenance(self) -> Provenance:
        return self.cost.provenance

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        if not chunks.seqs:
            return self.cost.prefill_step_seconds(chunks, decode_seqs, context_tokens)
        if not decode_seqs:
            return self.cost.floor_s
        return self.cost.prefill_step_seconds(PrefillChunks(), decode_seqs, context_tokens - chunks.prior_tokens)

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        return self.cost.decode_steps_seconds(decode_seqs, context_tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedLoopBenchmark:
    """One benchmark as a client runs it.

    Args:
        concurrency: requests in flight (the client's max concurrency).
        prompt_tokens, output_tokens: fixed lengths of every request.
        rounds: requests sent = rounds x concurrency.
        warmup_rounds: the first warmup_rounds x concurrency requests are left out of the figures
            (0: the opening burst counts, as `vllm bench serve` counts it).
    """

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    rounds: int = 4
    warmup_rounds: int = 0

    def __post_init__(self) -> None:
        if min(self.concurrency, self.prompt_tokens, self.output_tokens, self.rounds) < 1:
            raise ValueError(f"a closed-loop benchmark needs positive sizes: {self}")
        if not 0 <= self.warmup_rounds < self.rounds:
            raise ValueError(f"warmup_rounds must be in [0, rounds): {self}")

    @property
    def n_requests(self) -> int:
        return self.rounds * self.concurrency


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Mean and P50/P90/P99 of one latency, in milliseconds."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, seconds: FloatArray) -> LatencySummary:
        finite = seconds[~np.isnan(seconds)] * 1e3
        if finite.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(finite, [50, 90, 99])
        return cls(float(finite.mean()), float(p50), float(p90), float(p99))


@dataclass(frozen=True, slots=True)
class BenchmarkLatencies:
    """What a benchmark client reports: TTFT and TPOT summaries and output throughput."""

    ttft_ms: LatencySummary
    tpot_ms: LatencySummary
    output_tokens_per_s: float
    requests: int


def replay(cost: StepCostModel, config: SchedulerConfig, bench: ClosedLoopBenchmark) -> BenchmarkLatencies:
    """Run `bench` against a replica whose steps cost `cost` and whose scheduler is `config`."""
    workload = make_workload(
        prompt=bench.prompt_tokens, output=bench.output_tokens, arrivals=np.zeros(bench.n_requests)
    )
    sim = ClosedLoopSimulation(cost, workload, config, concurrency=bench.concurrency)
    run = sim.run()
    kept = slice(bench.warmup_rounds * bench.concurrency, None)
    sent = sim.sent_at()[kept]
    finished = sent + run.e2e_s[kept]
    duration = float(finished.max() - sent.min())
    return BenchmarkLatencies(
        ttft_ms=LatencySummary.of(run.ttft_s[kept]),
        tpot_ms=LatencySummary.of(run.tpot_s[kept]),
        output_tokens_per_s=bench.output_tokens * len(sent) / duration if duration > 0 else math.nan,
        requests=len(sent),
    )
