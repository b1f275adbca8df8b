"""What a simulation reports: per-request latencies, their percentiles, throughput and goodput.

Percentiles skip the first requests (warm-up, while the batch fills), so a short run's
P99 is not set by the empty system it started from.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# FloatArray at run time: the fields' annotations stay resolvable (typing.get_type_hints).
from recommender.perf.sim.workload import FloatArray

if TYPE_CHECKING:
    from collections.abc import Sequence

    from recommender.perf.sim.workload import Workload

__all__ = ["WARMUP_FRACTION", "Percentiles", "SimulationResult"]

#: Fraction of the requests, the first to arrive, left out of the percentiles.
WARMUP_FRACTION = 0.1


#: The quantiles ``Percentiles`` holds, as numpy divides them (``np.percentile``'s q / 100).
_QUANTILES = tuple(float(q) for q in np.true_divide([50, 95, 99], 100))


def _linear_quantile(ordered: FloatArray, q: float) -> float:
    """``np.percentile(values, 100 q)`` of `values` sorted (at least at the ranks it reads), by numpy's own
    arithmetic ('linear': the virtual index (n - 1) q, its neighbours, numpy's two-sided lerp) to the last bit,
    without its per-call overhead (three percentiles of three latencies per run, thousands of runs per plan)."""
    n = len(ordered)
    virtual = (n - 1) * q
    if virtual >= n - 1:
        return float(ordered[-1])
    below = math.floor(virtual)
    a, b, t = float(ordered[below]), float(ordered[below + 1]), virtual - below
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


@dataclass(frozen=True, slots=True)
class Percentiles:
    """P50, P95 and P99 of one latency, in milliseconds."""

    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, seconds: FloatArray) -> Percentiles:
        """The percentiles of `seconds`, NaNs left out (all NaN: NaN percentiles)."""
        finite = seconds[~np.isnan(seconds)]
        if finite.size == 0:
            return cls(math.nan, math.nan, math.nan)
        n = finite.size
        ranks = {min(math.floor((n - 1) * q) + step, n - 1) for q in _QUANTILES for step in (0, 1)}
        finite.partition(sorted(ranks))  # each rank's value where a sort would put it (a copy: `seconds` untouched)
        return cls(*(_linear_quantile(finite, q) * 1e3 for q in _QUANTILES))


@dataclass(frozen=True)
class SimulationResult:
    """Per-request latencies (seconds, arrival order), their percentiles (ms), and throughput.

    Percentiles skip the first 10 % of requests (warm-up, while the batch fills). TPOT is
    NaN for one-token outputs. Goodput counts every request meeting both SLAs, over the
    simulated duration, and is None when no SLA was given.
    """

    ttft_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    #: The requests (arrival order, [start, end)) the percentiles are over: past the warm-up by default; a steady
    #: run's between its warm-up and its drain (``settle.py``).
    window: tuple[int, int]
    output_tokens_per_s: float
    total_tokens_per_s: float
    goodput_rps: float | None
    preemptions: int
    duration_s: float
    steps: int
    max_step_tokens: int
    #: Prompt tokens read from the prefix cache instead of computed, and prompt tokens computed (recomputed
    #: after a preemption included).
    prefix_hit_tokens: int = 0
    prefill_tokens: int = 0
    #: Each request's arrival (seconds, arrival order; None where a result was built without them): with
    #: `e2e_s` it says when each finished, so whether completions kept up with arrivals (``settle.py``).
    arrivals_s: FloatArray | None = None

    # The percentiles are computed when first read: a capacity search reads two of the three, of one window per run.
    @functools.cached_property
    def ttft_ms(self) -> Percentiles:
        return Percentiles.of(self.ttft_s[slice(*self.window)])

    @functools.cached_property
    def tpot_ms(self) -> Percentiles:
        return Percentiles.of(self.tpot_s[slice(*self.window)])

    @functools.cached_property
    def e2e_ms(self) -> Percentiles:
        return Percentiles.of(self.e2e_s[slice(*self.window)])

    @property
    def prefix_hit_rate(self) -> float:
        """The fraction of prompt tokens the prefix cache served (0.0 when nothing was prefilled)."""
        total = self.prefix_hit_tokens + self.prefill_tokens
        return self.prefix_hit_tokens / total if total else 0.0

    @property
    def n_requests(self) -> int:
        return len(self.ttft_s)

    def meets(self, *, ttft_p99_ms: float, tpot_p99_ms: float) -> bool:
        """Whether P99 TTFT and P99 TPOT are within the SLA (a NaN TPOT, all one-token outputs, passes)."""
        return self.ttft_ms.p99 <= ttft_p99_ms and not self.tpot_ms.p99 > tpot_p99_ms

    @classmethod
    def of_run(
        cls,
        workload: Workload,
        first_token_s: Sequence[float] | FloatArray,
        finish_s: Sequence[float] | FloatArray,
        *,
        preemptions: int,
        steps: int,
        max_step_tokens: int,
        ttft_sla_ms: float | None = None,
        tpot_sla_ms: float | None = None,
        prefix_hit_tokens: int = 0,
        prefill_tokens: int = 0,
    ) -> SimulationResult:
        """Latencies, percentiles and throughput from each request's first-token and finish times."""
        arrivals = workload.arrivals_s
        first = np.asarray(first_token_s)
        done = np.asarray(finish_s)
        outputs = workload.output_tokens
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(outputs > 1, (done - first) / (outputs - 1), math.nan)
        return cls.of_latencies(
            workload,
            first - arrivals,
            tpot,
            done - arrivals,
            duration_s=float(done.max() - arrivals[0]),
            preemptions=preemptions,
            steps=steps,
            max_step_tokens=max_step_tokens,
            ttft_sla_ms=ttft_sla_ms,
            tpot_sla_ms=tpot_sla_ms,
            prefix_hit_tokens=prefix_hit_tokens,
            prefill_tokens=prefill_tokens,
        )

    @classmethod
    def of_latencies(
        cls,
        workload: Workload,
        ttft: FloatArray,
        tpot: FloatArray,
        e2e: FloatArray,
        *,
        duration_s: float,
        preemptions: int,
        steps: int,
        max_step_tokens: int,
        ttft_sla_ms: float | None = None,
        tpot_sla_ms: float | None = None,
        prefix_hit_tokens: int = 0,
        prefill_tokens: int = 0,
    ) -> SimulationResult:
        """Percentiles, throughput and goodput from each request's latencies (seconds, `workload`'s order): a
        run's (:meth:`of_run`), or several replicas' requests put back in one order (``fleet.py``); `duration_s`
        from the first arrival to the last finish."""
        arrivals = workload.arrivals_s
        outputs = workload.output_tokens
        duration = duration_s
        out_total = float(outputs.sum())
        return cls(
            ttft_s=ttft,
            tpot_s=tpot,
            e2e_s=e2e,
            window=(int(len(arrivals) * WARMUP_FRACTION), len(arrivals)),
            output_tokens_per_s=out_total / duration if duration > 0 else math.nan,
            total_tokens_per_s=(out_total + float(workload.prompt_tokens.sum())) / duration
            if duration > 0
            else math.nan,
            goodput_rps=_goodput(ttft, tpot, duration, ttft_sla_ms, tpot_sla_ms),
            preemptions=preemptions,
            duration_s=duration,
            steps=steps,
            max_step_tokens=max_step_tokens,
            prefix_hit_tokens=prefix_hit_tokens,
            prefill_tokens=prefill_tokens,
            arrivals_s=np.asarray(arrivals, dtype=float),
        )


def _goodput(
    ttft: FloatArray, tpot: FloatArray, duration: float, ttft_sla_ms: float | None, tpot_sla_ms: float | None
) -> float | None:
    """Requests per second meeting both SLAs (a NaN TPOT passes its own); None when no SLA is given."""
    if ttft_sla_ms is None and tpot_sla_ms is None:
        return None
    ok = np.ones(len(ttft), dtype=bool)
    if ttft_sla_ms is not None:
        ok &= ttft * 1e3 <= ttft_sla_ms
    if tpot_sla_ms is not None:
        ok &= np.isnan(tpot) | (tpot * 1e3 <= tpot_sla_ms)
    return float(ok.sum() / duration) if duration > 0 else math.nan
