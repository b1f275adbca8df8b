"""One closed-loop benchmark predicted: what `vllm bench serve --max-concurrency C` would report.

The same calibrated step cost and scheduler simulation the search and `plan` use, driven the
way a benchmark client drives a server (``closed_loop.py``), with each figure's interval
from the calibration's cross-validation (``calibrated.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.fit.design_rows import replay_config
from recommender.perf.sim.closed_loop import BenchmarkLatencies, ClosedLoopBenchmark, LatencySummary, replay
from recommender.perf.sim.engine_profiles import EngineProfile
from recommender.perf.step.calibrated import CalibratedModel, Interval, Metric
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme
    from recommender.perf.step.features import FeatureStepCost

__all__ = ["BenchmarkEstimate", "EstimateRequest", "FigureWithInterval", "estimate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EstimateRequest:
    """What to estimate: a model on a GPU with a scheme and an engine, under a closed-loop client."""

    model: str
    shape: ModelShape
    method: Scheme
    accel: Accelerator
    #: The engine's batching (``recommender.engines.PROFILES``); its name picks the calibrated coefficients.
    profile: EngineProfile
    tensor_parallel: int
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    confidence: float = 0.9
    kv_cache_dtype: str = "auto"
    #: The client's requests (rounds x concurrency; None: the calibration's protocol) and the first
    #: warmup_rounds x concurrency of them it leaves out of its figures (0: the opening burst counts).
    rounds: int | None = None
    warmup_rounds: int = 0
    #: The engine release predicted (``engines/engine_release.py``; None: the current one).
    engine_release: str | None = None

    @property
    def engine(self) -> str:
        return self.profile.name


@dataclass(frozen=True, slots=True)
class FigureWithInterval:
    """A predicted figure (ms or tokens/s) and its interval."""

    value: float
    interval: Interval


@dataclass(frozen=True, slots=True)
class BenchmarkEstimate:
    """Mean and P50/P90/P99 TTFT and TPOT (ms), output tokens/s, KV capacity, each with its provenance."""

    model: str
    hardware: str
    scheme: str
    engine: str
    tensor_parallel: int
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: dict[str, FigureWithInterval]
    tpot_ms: dict[str, FigureWithInterval]
    output_tokens_per_s: FigureWithInterval
    kv_cache_tokens: int
    kv_cache_dtype: str
    requests_simulated: int
    provenance: Provenance


def _with_intervals(
    summary: LatencySummary,
    metric: Metric,
    model: CalibratedModel,
    cost: FeatureStepCost,
    engine: str,
    confidence: float,
    extra_ms: float,
) -> dict[str, FigureWithInterval]:
    values = {"mean": summary.mean, "p50": summary.p50, "p90": summary.p90, "p99": summary.p99}
    return {
        k: FigureWithInterval(v + extra_ms, model.interval(v + extra_ms, metric, engine, confidence, cost))
        for k, v in values.items()
    }


def _warmup(bench: ClosedLoopBenchmark) -> str:
    left_out = bench.warmup_rounds * bench.concurrency
    return f"the first {left_out} left out as warm-up" if left_out else "opening burst counted"


def estimate(request: EstimateRequest, model: CalibratedModel) -> BenchmarkEstimate:
    """Replay the benchmark through the calibrated step cost of the request's engine."""
    r = request
    cost = model.step_cost(
        r.shape,
        r.method,
        r.accel,
        r.engine,
        tensor_parallel=r.tensor_parallel,
        kv_cache_dtype=r.kv_cache_dtype,
        kv_read_at_cache_width=r.profile.reads_kv_at_cache_width(r.engine_release),
        release=r.engine_release,
    )
    config = replay_config(
        r.shape, cost.features, r.profile, concurrency=r.concurrency, kv_cache_dtype=r.kv_cache_dtype
    )
    fit = model.fit
    bench = ClosedLoopBenchmark(
        concurrency=r.concurrency,
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        rounds=r.rounds or fit.protocol_rounds,
        warmup_rounds=r.warmup_rounds,
    )
    got: BenchmarkLatencies = replay(cost, config, bench)
    request_ms = model.request_overhead_ms(r.engine, cost, r.engine_release)
    # Throughput is output tokens over time: its error mirrors TPOT's (the decode steps dominate it).
    tps = model.interval(got.output_tokens_per_s, "tpot", r.engine, r.confidence, cost)
    throughput = FigureWithInterval(
        got.output_tokens_per_s,
        Interval(
            low=got.output_tokens_per_s**2 / tps.high,
            high=got.output_tokens_per_s**2 / tps.low,
            confidence=r.confidence,
        ),
    )
    profile = r.profile
    return BenchmarkEstimate(
        model=r.model,
        hardware=r.accel.key,
        scheme=r.method.name,
        engine=r.engine,
        tensor_parallel=r.tensor_parallel,
        concurrency=r.concurrency,
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        ttft_ms=_with_intervals(got.ttft_ms, "ttft", model, cost, r.engine, r.confidence, request_ms),
        tpot_ms=_with_intervals(got.tpot_ms, "tpot", model, cost, r.engine, r.confidence, 0.0),
        output_tokens_per_s=throughput,
        kv_cache_tokens=config.kv_cache_tokens,
        kv_cache_dtype=r.kv_cache_dtype,
        requests_simulated=got.requests,
        provenance=cost.provenance.extended(
            f"closed-loop replay: {r.concurrency} in flight, {bench.n_requests} requests, {_warmup(bench)}; "
            f"{r.engine} batching: {profile.describe()}; intervals: central "
            f"{r.confidence:.0%} of cross-validated log residuals of mean latencies"
        ),
    )
