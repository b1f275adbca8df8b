"""One candidate configuration and everything the search learns about it.

A candidate is precision+method x hardware x tensor-parallel degree x batch size. Its
evaluation runs cheapest-first: can the method run on that hardware, does it fit in
memory (both answered without loading a model), then quality (cached per method),
then speed (measured here for the local device, modeled for catalog accelerators),
then latency and cost. Every figure keeps its provenance.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from recommender.cost import CostEstimate, estimate_cost
from recommender.errors import MethodUnavailableError
from recommender.model_cache import ModelCache
from recommender.perf.catalog import Catalog
from recommender.perf.memory import DEFAULT_GPU_MEMORY_UTILIZATION, plan_memory
from recommender.perf.probe import ProbeResult, probe
from recommender.perf.serving import (
    DEFAULT_MAX_BATCHED_TOKENS,
    SIMULATED_REQUESTS,
    ServingEstimate,
    simulate_serving,
)
from recommender.perf.shape import ModelShape
from recommender.perf.simulator import (
    RooflineStepCost,
    SchedulerConfig,
    StepCostModel,
    TableStepCost,
    make_workload,
    simulate,
)
from recommender.quality.evaluate import QualityEvaluator, QualityResult
from recommender.quality.verdict import Check
from recommender.quantize import QuantMethod, get_method, with_kv_cache
from recommender.spec import LOCAL_DEVICE, Deployment, LatencySLA, SearchSpec

#: Fraction of accelerator memory the serving engine may use (vLLM's default gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = DEFAULT_GPU_MEMORY_UTILIZATION

#: "pruned": refused before a model loads (runnable, memory); "failed": its evaluation raised (out of memory,
#: a kernel error), the reason in `broken`.
Status = Literal["evaluated", "pruned", "failed"]


@dataclass(frozen=True, slots=True)
class Candidate:
    precision: str
    method: str
    hardware: str
    batch_size: int
    tensor_parallel: int = 1
    max_num_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    kv_cache_dtype: str = "auto"

    @classmethod
    def from_deployment(cls, d: Deployment) -> Candidate:
        return cls(
            d.precision, d.method, d.hardware, d.batch_size, d.tensor_parallel, d.max_num_batched_tokens,
            d.kv_cache_dtype,
        )  # fmt: skip

    @property
    def key(self) -> str:
        """Unique per configuration; settings at their defaults are left out so keys stay short."""
        key = f"{self.precision}/{self.method}@{self.hardware}x{self.tensor_parallel}/bs{self.batch_size}"
        if self.max_num_batched_tokens != DEFAULT_MAX_BATCHED_TOKENS:
            key += f"/tok{self.max_num_batched_tokens}"
        if self.kv_cache_dtype != "auto":
            key += f"/kv-{self.kv_cache_dtype}"
        return key


@dataclass
class CandidateResult:
    """What the search knows about a candidate; `constraints` > 0 means that limit is broken."""

    candidate: Candidate
    status: Status
    constraints: dict[str, float]
    broken: list[str]
    quality_verdict: str = "unverified"
    quality: dict[str, Any] | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tokens_per_s: float | None = None
    perf_provenance: str = ""
    memory_gb: float | None = None
    memory_available_gb: float | None = None
    cost: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None

    @property
    def feasible(self) -> bool:
        return self.status == "evaluated" and not self.broken and self.quality_verdict == "pass"

    @property
    def quality_loss(self) -> float:
        """Mean KL divergence from the bf16 model — a threshold-free measure of what quantization
        lost, the second objective of the Pareto front; infinite while quality is unmeasured."""
        fidelity = (self.quality or {}).get("fidelity")
        if fidelity is not None:
            return float(fidelity["mean_kl"])
        if self.quality and self.quality.get("method") == "baseline":
            return 0.0
        return math.inf

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return None if self.cost is None else float(self.cost["usd_per_1m_tokens"])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["key"] = self.candidate.key
        data["feasible"] = self.feasible
        data["quality_loss"] = self.quality_loss if math.isfinite(self.quality_loss) else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateResult:
        fields = {k: v for k, v in data.items() if k not in ("key", "feasible", "quality_loss")}
        fields["candidate"] = Candidate(**fields["candidate"])
        return cls(**fields)


CONSTRAINT_KEYS = ("runnable", "memory", "quality", "ttft", "tpot")


def _describe_broken_check(check: Check) -> str:
    if check.value is None:
        return f"quality: {check.name} {check.metric} unverified"
    base = "" if check.baseline is None else f" (bf16 {check.baseline:.4g})"
    verb = "is inconclusive against" if check.verdict == "inconclusive" else "breaks"
    return f"quality: {check.name} {check.metric} {check.value:.4g}{base} {verb} {check.threshold}"


def _local_memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        return 0.0


@dataclass(frozen=True)
class _Setup:
    """A candidate that passed the runnable and memory checks, ready to simulate."""

    method: QuantMethod
    step_cost: StepCostModel
    scheduler: SchedulerConfig
    price_per_hour_usd: float
    price_source: str
    need_gb: float
    available_gb: float
    probe: ProbeResult | None


def _why_quality_cannot_matter(
    serving: ServingEstimate, cost: CostEstimate | None, sla: LatencySLA, cost_bound: float | None
) -> str | None:
    """Why this candidate cannot be recommended whatever its quality, or None when quality decides."""
    if cost is None:
        return "not evaluated: no arrival rate meets the latency SLA"
    if serving.ttft_ms > sla.ttft_p99_ms or serving.tpot_ms > sla.tpot_p99_ms:
        return "not evaluated: the latency SLA is already broken"
    if cost_bound is not None and cost.usd_per_1m_tokens > cost_bound:
        return (
            f"not evaluated: ${cost.usd_per_1m_tokens:.4g}/1M tokens is above ${cost_bound:.4g}, "
            "a feasible candidate's price (tie tolerance included)"
        )
    return None


@dataclass
class CandidateEvaluator:
    """Evaluates candidates of one spec, caching quality per method and probes per (method, batch)."""

    spec: SearchSpec
    catalog: Catalog
    shape: ModelShape
    models: ModelCache
    quality: QualityEvaluator
    _probes: dict[tuple[str, int], ProbeResult] = field(default_factory=dict)

    @property
    def probes_run(self) -> int:
        return len(self._probes)

    def _pruned(self, c: Candidate, key: str, why: str, **extra: Any) -> CandidateResult:
        constraints = {k: 0.0 for k in CONSTRAINT_KEYS} | {key: 1.0}
        return CandidateResult(c, "pruned", constraints, [f"{key}: {why}"], **extra)

    def evaluate(self, c: Candidate, *, cost_bound: float | None = None) -> CandidateResult:
        """Everything about `c`, cheapest checks first.

        Quality is measured last and only where it can matter: a candidate that already
        breaks a latency limit, or costs more than `cost_bound` (the price of a feasible
        candidate found earlier, tie tolerance included), cannot be recommended, so its
        quality stays "unverified" with that reason — unless its method's quality is known.
        """
        setup = self._setup(c)
        if isinstance(setup, CandidateResult):
            return setup
        traffic = self.spec.traffic
        serving = simulate_serving(setup.step_cost, setup.scheduler, traffic=traffic, sla=self.spec.sla)
        need, available, probe_result = setup.need_gb, setup.available_gb, setup.probe
        method = setup.method
        cost = None
        if serving.requests_per_s > 0:  # else not even a lone request meets the SLA: nothing to price
            cost = estimate_cost(
                price_per_hour_usd=setup.price_per_hour_usd,
                price_source=setup.price_source,
                tensor_parallel=c.tensor_parallel,
                replica_tokens_per_s=serving.tokens_per_s,
                replica_requests_per_s=serving.requests_per_s,
                target_requests_per_s=traffic.requests_per_second,
            )
        quality_method = with_kv_cache(method, c.kv_cache_dtype)
        skip = None if self.quality.has(quality_method.name) else _why_quality_cannot_matter(
            serving, cost, self.spec.sla, cost_bound
        )  # fmt: skip
        quality = (
            self.quality.evaluate(quality_method) if skip is None else self.quality.not_evaluated(quality_method, skip)
        )
        return self._assemble(c, quality, serving, cost, need, available, probe_result)

    def _setup(self, c: Candidate) -> CandidateResult | _Setup:
        """The pruned result, or what evaluating `c` needs: its step-cost model, scheduler, price, memory."""
        method = get_method(c.method)
        traffic = self.spec.traffic
        is_local = c.hardware == LOCAL_DEVICE
        accel = None if is_local else self.catalog.get(c.hardware)
        device = self.models.device if accel is None else accel.device
        reason = method.unavailable_reason(device)
        if reason is not None:
            return self._pruned(c, "runnable", reason)
        if accel is None and c.kv_cache_dtype != "auto":
            return self._pruned(
                c, "runnable", f"kv_cache_dtype {c.kv_cache_dtype}: the local probe (transformers) has no fp8 KV "
                "storage to time; its quality is measured, its speed only modeled on catalog GPUs",
            )  # fmt: skip
        max_tp = 1 if accel is None else accel.max_tensor_parallel
        if c.tensor_parallel > max_tp:
            return self._pruned(c, "runnable", f"tensor_parallel {c.tensor_parallel} > {max_tp} devices per node")

        context = traffic.prompt_tokens + traffic.output_tokens
        memory = plan_memory(
            self.shape,
            method,
            device_gb=_local_memory_gb() if accel is None else accel.memory_gb,
            memory_utilization=GPU_MEMORY_UTILIZATION,
            tensor_parallel=c.tensor_parallel,
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_num_seqs=c.batch_size,
            kv_cache_dtype=c.kv_cache_dtype,
        )
        # A catalog GPU needs room for one request; the scheduler caps concurrency at the KV
        # cache. The local probe really runs the whole batch, so there all of it must fit.
        must_fit = c.batch_size if accel is None else 1
        need, available = memory.needed_gb(must_fit, context), memory.usable_gb
        shortfall = memory.shortfall(must_fit, context)
        if shortfall is not None:
            return self._pruned(c, "memory", shortfall, memory_gb=need, memory_available_gb=available)

        probe_result: ProbeResult | None = None
        if accel is None:
            try:
                step_cost, probe_result = self._measured_step_cost(c)
            except MethodUnavailableError as exc:
                return self._pruned(c, "runnable", str(exc))
            price, price_source = self.spec.local_device.price_per_hour_usd, self.spec.local_device.price_source  # type: ignore[union-attr]
        else:
            step_cost = RooflineStepCost(
                self.shape, method, accel, tensor_parallel=c.tensor_parallel, kv_cache_dtype=c.kv_cache_dtype
            )
            price, price_source = accel.price_per_hour_usd, f"{accel.price_source} ({accel.price_date})"
        scheduler = SchedulerConfig(
            kv_cache_tokens=memory.kv_cache_tokens,
            max_num_seqs=c.batch_size,
            max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size),
        )
        return _Setup(method, step_cost, scheduler, price, price_source, need, available, probe_result)

    def load_curve(self, c: Candidate, *, points: int = 8) -> dict[str, Any] | None:
        """P99 TTFT and TPOT of one replica from a trickle of traffic up to 1.3x its capacity within the SLA.

        None for a pruned candidate. Probes are kept per process: after a resume a local winner is probed again.
        """
        setup = self._setup(c)
        if isinstance(setup, CandidateResult):
            return None
        cost, scheduler = setup.step_cost, setup.scheduler
        traffic, sla = self.spec.traffic, self.spec.sla
        capacity = simulate_serving(cost, scheduler, traffic=traffic, sla=sla).requests_per_s
        if capacity <= 0:
            return None
        curve = []
        for i in range(1, points + 1):
            rate = capacity * 1.3 * i / points
            workload = make_workload(
                prompt=traffic.prompt_tokens, output=traffic.output_tokens, n_requests=SIMULATED_REQUESTS, rate=rate
            )
            result = simulate(cost, workload, scheduler)
            curve.append({"rate_per_s": rate, "ttft_p99_ms": result.ttft_ms.p99, "tpot_p99_ms": result.tpot_ms.p99})
        return {
            "points": curve,
            "sla": {"ttft_p99_ms": sla.ttft_p99_ms, "tpot_p99_ms": sla.tpot_p99_ms},
            "capacity_rate_per_s": capacity,
            "provenance": getattr(cost, "provenance", "step-cost model") + "; continuous-batching simulation",
        }

    def _probe(self, method: str, batch_size: int) -> ProbeResult:
        key = (method, batch_size)
        if key not in self._probes:
            model = self.models.get(get_method(method))
            self._probes[key] = probe(model, prompt_tokens=self.spec.traffic.prompt_tokens, batch_size=batch_size)
        return self._probes[key]

    def _measured_step_cost(self, c: Candidate) -> tuple[TableStepCost, ProbeResult]:
        """Step times measured here at batch 1, every searched batch size up to the candidate's, and its own.

        The simulator's decode steps run at every batch size up to ``max_num_seqs``; between
        measured sizes the table interpolates, so each figure stays a measured one.
        """
        sizes = sorted({1, c.batch_size} | {b for b in self.spec.space.batch_sizes if b <= c.batch_size})
        probes = [self._probe(c.method, b) for b in sizes]
        prompt = self.spec.traffic.prompt_tokens
        own = probes[-1]
        table = TableStepCost(
            prefill={prompt: statistics.median(p.prefill_s for p in probes)},
            decode={p.batch_size: p.decode_step_s for p in probes},
            provenance=f"{own.provenance}; decode measured at batch sizes {sizes}, interpolated between them",
        )
        return table, own

    def _assemble(
        self,
        c: Candidate,
        quality: QualityResult,
        serving: ServingEstimate,
        cost: CostEstimate | None,
        need: float,
        available: float,
        probe_result: ProbeResult | None,
    ) -> CandidateResult:
        sla = self.spec.sla
        margins = [ch.margin for ch in quality.checks if ch.margin is not None]
        quality_margin = 1.0 if quality.verdict == "unverified" else max(margins, default=0.0)
        constraints = {
            "runnable": 0.0,
            "memory": need / available - 1.0,
            "quality": quality_margin,
            "ttft": serving.ttft_ms / sla.ttft_p99_ms - 1.0,
            "tpot": serving.tpot_ms / sla.tpot_p99_ms - 1.0,
        }
        if quality.reason:  # nothing measured: one line saying why, not one per check
            broken = [f"quality: unverified ({quality.reason})"]
        else:
            broken = [_describe_broken_check(ch) for ch in quality.checks if ch.verdict != "pass"]
        if constraints["ttft"] > 0:
            broken.append(f"ttft: P99 {serving.ttft_ms:.1f} ms > SLA {sla.ttft_p99_ms:g} ms")
        if constraints["tpot"] > 0:
            broken.append(f"tpot: P99 {serving.tpot_ms:.2f} ms > SLA {sla.tpot_p99_ms:g} ms")
        return CandidateResult(
            candidate=c,
            status="evaluated",
            constraints=constraints,
            broken=broken,
            quality_verdict=quality.verdict,
            quality=quality.to_dict(),
            ttft_ms=serving.ttft_ms,
            tpot_ms=serving.tpot_ms,
            tokens_per_s=serving.tokens_per_s,
            perf_provenance=serving.provenance,
            memory_gb=need,
            memory_available_gb=available,
            cost=asdict(cost) if cost else None,
            probe=probe_result.to_dict() if probe_result else None,
        )
